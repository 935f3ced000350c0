// A real Chromium on a test-bed host, as a person there would have it: WebRTC with the browser's
// defaults (mDNS host candidates, no test flags), the coordinator's CA imported into the
// profile's certificate store (NSS, with Debian's certutil) the way a person trusts it. Only
// the software-WebGPU flags remain (this machine has no GPU).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { chromiumFlags, CHROMIUM_PATH } from '../chromium.ts';
import type { Testbed } from './bed.ts';

const certutil = (args: string[]) => new Promise<void>((resolve, reject) => {
  execFile('certutil', args, { timeout: 15_000 }, (e, _o, err) => (e
    ? reject(new Error(`certutil ${args.join(' ')}: ${String(err).trim() || e.message}`))
    : resolve()));
});

export interface HostBrowser { browser: Browser; close(): Promise<void> }

export async function launchChromiumIn(bed: Testbed, host: string, caPem: string | null): Promise<HostBrowser> {
  if (!existsSync(CHROMIUM_PATH)) throw new Error(`Chromium not found at ${CHROMIUM_PATH}: run 'npm run setup'`);
  const home = mkdtempSync(join(tmpdir(), 'vt-chromium-host-'));
  for (const sub of ['config', 'cache', 'runtime', '.pki/nssdb']) mkdirSync(join(home, sub), { recursive: true, mode: 0o700 });
  if (caPem) {
    if (!existsSync('/usr/bin/certutil')) {
      throw new Error("certutil not found: run 'npm run setup' (installs libnss3-tools) to import the test CA the way a person would");
    }
    const db = `sql:${join(home, '.pki/nssdb')}`;
    writeFileSync(join(home, 'ca.crt'), caPem);
    await certutil(['-d', db, '-N', '--empty-password']);
    await certutil(['-d', db, '-A', '-t', 'C,,', '-n', 'volunteer-trainer test CA', '-i', join(home, 'ca.crt')]);
  }
  const browser = await chromium.launch({
    executablePath: bed.chromiumIn(host),
    headless: true,
    args: chromiumFlags('llvmpipe', false),
    env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'), XDG_RUNTIME_DIR: join(home, 'runtime') },
  });
  return { browser, close: async () => { await browser.close(); rmSync(home, { recursive: true, force: true }); } };
}
