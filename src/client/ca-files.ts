// The files a Node process needs to trust a coordinator's own CA (the volunteer's --ca and
// --ca-fingerprint, node-trust.ts; the coordinator writes them too, coordinator/tls.ts): where the
// CA folder lives, a CA file Node reads through NODE_EXTRA_CA_CERTS, and fingerprints as people
// type them. Node only: it writes files.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The coordinator's settings folder for its CA (beside the data cache). */
export const DEFAULT_TLS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '.cache', 'tls');

/** Accepts "AB:CD:..." or "abcd..." in any case; null when it is not a SHA-256 fingerprint. */
export function normalizeFingerprint(text: string): string | null {
  const hex = text.replace(/[:\s]/g, '').toUpperCase();
  if (!/^[0-9A-F]{64}$/.test(hex)) return null;
  return hex.match(/../g)!.join(':');
}

/** Writes `path` whole or not at all (a temporary file renamed over it), with `mode`. */
async function writeAtomic(path: string, data: string, mode: number): Promise<void> {
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, data, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
}

/**
 * A file for NODE_EXTRA_CA_CERTS that trusts `caPem` besides what the variable already named
 * (Node reads one file, at start-up): written next to the CA.
 */
export async function extraCaFile(dir: string, caPem: string, current = process.env.NODE_EXTRA_CA_CERTS): Promise<string> {
  let prior = '';
  if (current && existsSync(current)) prior = await readFile(current, 'utf8').catch(() => '');
  const tag = createHash('sha256').update(prior).update(caPem).digest('hex').slice(0, 12);
  const path = join(dir, `node-extra-ca-${tag}.pem`);
  if (!existsSync(path)) await writeAtomic(path, `${prior.trimEnd()}${prior ? '\n' : ''}${caPem.trimEnd()}\n`, 0o644);
  return path;
}
