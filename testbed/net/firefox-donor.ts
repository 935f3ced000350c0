// A stock Firefox (Debian's firefox-esr, no patched build) donating from the donor page, driven
// through WebDriver BiDi by puppeteer-core. Run INSIDE a test-bed host (bed.spawn): Firefox's
// remote agent listens on the loopback of the namespace it runs in, so its driver runs there too.
// The coordinator's CA is imported into the profile's NSS store with certutil, as a person who
// trusts it would; no certificate error is skipped.
//
//   node --import tsx testbed/net/firefox-donor.ts --url URL --ca CA.crt --name NAME [--backend wasm]
//
// Prints one JSON object per line on stdout: {event: 'launched', version}, {event: 'page', ...}
// (what the page is: secure, isolated, WebGPU, its backend and device), {event: 'donating'},
// {event: 'status', text} when the page's status changes, {event: 'console', level, text} for
// the page's warnings and errors, {event: 'error', message} and exit 1 when something fails.
// SIGTERM (or stdin closing) closes Firefox and exits.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';

export const FIREFOX_PATH = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';

type Event = Record<string, unknown> & { event: string };
const say = (e: Event): void => void process.stdout.write(`${JSON.stringify(e)}\n`);

function arg(name: string, fallback?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : fallback;
  if (v === undefined) throw new Error(`firefox-donor: --${name} is required`);
  return v;
}

const run = (cmd: string, args: string[]) => new Promise<void>((resolve, reject) => {
  execFile(cmd, args, { timeout: 15_000 }, (e, _o, err) => (e ? reject(new Error(`${cmd} ${args.join(' ')}: ${String(err).trim() || e.message}`)) : resolve()));
});

/** A fresh profile whose certificate store trusts `caFile` for web sites. */
async function profileTrusting(caFile: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'vt-firefox-'));
  const db = `sql:${dir}`;
  await run('certutil', ['-d', db, '-N', '--empty-password']);
  await run('certutil', ['-d', db, '-A', '-t', 'C,,', '-n', 'volunteer-trainer test CA', '-i', caFile]);
  return dir;
}

async function main(): Promise<void> {
  const url = arg('url'), ca = arg('ca'), name = arg('name'), backend = arg('backend', 'wasm');
  if (!existsSync(FIREFOX_PATH)) throw new Error(`Firefox not found at ${FIREFOX_PATH}: run 'npm run setup' (installs firefox-esr)`);
  const profile = await profileTrusting(ca);
  let browser: Browser | null = null;
  const close = async (code: number) => {
    await browser?.close().catch(() => undefined);
    rmSync(profile, { recursive: true, force: true });
    process.exit(code);
  };
  process.once('SIGTERM', () => void close(0));
  process.stdin.on('end', () => void close(0)).resume();
  try {
    browser = await puppeteer.launch({
      browser: 'firefox', executablePath: FIREFOX_PATH, headless: true, userDataDir: profile, protocolTimeout: 180_000,
      // Only what automation needs; WebRTC keeps Firefox's defaults (mDNS host names included).
      extraPrefsFirefox: { 'browser.shell.checkDefaultBrowser': false, 'datareporting.policy.dataSubmissionEnabled': false },
    });
    say({ event: 'launched', version: await browser.version() });
    const page = await browser.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warn') say({ event: 'console', level: m.type(), text: m.text() });
    });
    page.on('pageerror', (e) => say({ event: 'console', level: 'pageerror', text: e instanceof Error ? e.message : String(e) }));
    await page.goto(`${url}/?name=${encodeURIComponent(name)}&backend=${encodeURIComponent(backend)}`, { timeout: 120_000 });
    await page.waitForFunction(
      () => document.getElementById('donate')?.dataset.probing === '' && document.getElementById('donate')?.dataset.device !== undefined,
      { timeout: 180_000 },
    );
    const what = await page.evaluate(() => ({
      secure: isSecureContext, isolated: crossOriginIsolated, gpu: 'gpu' in navigator,
      backend: document.getElementById('donate')?.dataset.backend ?? null, device: document.getElementById('device')?.textContent ?? null,
    }));
    say({ event: 'page', ...what });
    await page.click('#toggle');
    say({ event: 'donating' });
    let last = '';
    for (;;) {
      const text = await page.evaluate(() => document.getElementById('status')?.textContent ?? '');
      if (text !== last) say({ event: 'status', text });
      last = text;
      await new Promise((r) => setTimeout(r, 1000));
    }
  } catch (e) {
    say({ event: 'error', message: e instanceof Error ? e.message : String(e) });
    await close(1);
  }
}

await main();
