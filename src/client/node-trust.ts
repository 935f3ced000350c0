// Trusting a lab coordinator's own certificate authority in the headless volunteer. Node reads
// extra trusted CAs from NODE_EXTRA_CA_CERTS once, at start-up (it covers fetch, https and the
// `ws` package alike), so with --ca FILE or --ca-sha256 FP the volunteer starts itself again
// with that variable pointing at a file that adds the coordinator's CA.
//   --ca FILE          the CA certificate (ca.crt from the coordinator's machine or its dashboard)
//   --ca-sha256 FP     fetch https://HOST:PORT/ca.crt and accept it only if its SHA-256
//                      fingerprint is FP (the one `npm start` printed): no file to copy around
import { X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { get } from 'node:https';
import { join } from 'node:path';
import { DEFAULT_TLS_DIR, extraCaFile, normalizeFingerprint } from './ca-files.ts';

export class TrustError extends Error {
  readonly kind = 'trust';
  constructor(message: string) {
    super(message);
    this.name = 'TrustError';
  }
}

const APPLIED = 'VT_TRUST_APPLIED';

/** Downloads the coordinator's CA without verifying (it is verified by its fingerprint next). */
function fetchCa(base: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = get(`${base.replace(/\/+$/, '')}/ca.crt`, { rejectUnauthorized: false, timeout: 10_000 }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new TrustError(
          `${base}/ca.crt answered ${res.statusCode}: this coordinator has no local CA (use --ca FILE with the certificate its owner gives you)`,
        ));
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; if (text.length > 65_536) req.destroy(new TrustError('ca.crt is too large')); });
      res.on('end', () => resolve(text));
    });
    req.on('timeout', () => req.destroy(new TrustError(`no answer from ${base} within 10 s`)));
    req.on('error', (e) => reject(e instanceof TrustError ? e : new TrustError(`cannot fetch ${base}/ca.crt: ${e.message}`)));
  });
}

/** The CA PEM the options name (verified), or null when neither option is given. */
export async function trustedCa(url: string, caFile: string, caSha256: string): Promise<string | null> {
  if (caFile) {
    const pem = await readFile(caFile, 'utf8').catch((e: NodeJS.ErrnoException) => { throw new TrustError(`--ca ${caFile}: ${e.code ?? e.message}`); });
    try {
      new X509Certificate(pem);
    } catch {
      throw new TrustError(`--ca ${caFile} is not a PEM certificate: give the coordinator's ca.crt (its dashboard offers it)`);
    }
    return pem;
  }
  if (caSha256) {
    const want = normalizeFingerprint(caSha256);
    if (!want) throw new TrustError(`--ca-sha256 must be a SHA-256 fingerprint (64 hex digits, colons allowed), as npm start prints it; got "${caSha256}"`);
    if (!url.startsWith('https:')) throw new TrustError('--ca-sha256 needs an https:// --url');
    const pem = await fetchCa(url);
    let got: string;
    try {
      got = new X509Certificate(pem).fingerprint256;
    } catch {
      throw new TrustError(`${url}/ca.crt is not a certificate`);
    }
    if (got !== want) {
      throw new TrustError(`the coordinator at ${url} offers a CA with SHA-256 ${got}, not ${want}: `
        + 'check the fingerprint its owner gave you (someone may be in between)');
    }
    return pem;
  }
  return null;
}

/**
 * What a volunteer's process must start with to trust `pem` (the coordinator's own CA): its
 * NODE_EXTRA_CA_CERTS file, written beside the CA folder; nothing when there is no CA to trust
 * or this process already started with it (Node reads the variable at start-up only).
 */
export async function trustEnv(pem: string | null): Promise<NodeJS.ProcessEnv> {
  if (!pem || process.env[APPLIED] === '1') return {};
  await mkdir(DEFAULT_TLS_DIR, { recursive: true, mode: 0o700 });
  const fp = new X509Certificate(pem).fingerprint256.replace(/:/g, '').slice(0, 16).toLowerCase();
  await writeFile(join(DEFAULT_TLS_DIR, `trusted-${fp}.crt`), pem);
  return { NODE_EXTRA_CA_CERTS: await extraCaFile(DEFAULT_TLS_DIR, pem), [APPLIED]: '1' };
}

const CERT_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** A first request to the coordinator that turns certificate failures into what to do. */
export async function checkReachable(url: string, fetchFn: typeof fetch = fetch): Promise<void> {
  try {
    const res = await fetchFn(`${url.replace(/\/+$/, '')}/api/job`);
    await res.body?.cancel();
  } catch (e) {
    const code = (e as { cause?: { code?: string } }).cause?.code ?? '';
    if (CERT_ERRORS.has(code)) {
      const hint = code === 'ERR_TLS_CERT_ALTNAME_INVALID'
        ? 'the coordinator\'s certificate does not name this address: use one of the addresses npm start printed'
        : 'add --ca-sha256 <the fingerprint npm start printed> (or --ca ca.crt)';
      throw new TrustError(`the coordinator's certificate at ${url} is not trusted here (${code}): ${hint}`);
    }
    // Other failures (not started yet, restarting) are retried by the volunteer.
  }
}
