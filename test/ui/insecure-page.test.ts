// One short check in headless Chromium: the page opened over plain HTTP on an address that is
// not localhost (here the name lab-pc.test, mapped to 127.0.0.1) is not a secure context, so it
// has no WebGPU; it must say that and link the https:// address, never "use another browser".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ViteDevServer } from 'vite';
import { launchChromium } from '../../testbed/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';

describe('index.html over plain HTTP from another machine', () => {
  let server: ViteDevServer;
  let port = '';
  beforeAll(async () => {
    const started = await startViteServer({ server: { allowedHosts: true } });
    server = started.server;
    port = new URL(started.origin).port;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('says the page is not secure, links https://, and still trains on wasm', async () => {
    const b = await launchChromium({ args: ['--host-resolver-rules=MAP lab-pc.test 127.0.0.1'] });
    try {
      const page = await (await b.newContext()).newPage();
      await page.goto(`http://lab-pc.test:${port}/?name=x`);
      expect(await page.evaluate(() => window.isSecureContext)).toBe(false);
      const box = page.locator('#insecure');
      await box.waitFor({ state: 'visible', timeout: 30_000 });
      expect(await box.textContent()).toContain('This page was opened over plain HTTP, so the browser gives it no WebGPU');
      expect(await box.locator('a').first().getAttribute('href')).toBe(`https://lab-pc.test:${port}/?name=x`);
      await page.waitForFunction(
        () => document.getElementById('donate')?.dataset.device !== undefined && document.getElementById('donate')?.dataset.probing === '', undefined,
        { timeout: 120_000 },
      );
      const device = (await page.textContent('#device')) ?? '';
      expect(device).toMatch(/^Training on WebAssembly SIMD \(CPU\)/);
      expect(device).toContain('plain HTTP');
      expect(`${device}\n${await page.textContent('body')}`).not.toMatch(/Use Chrome or Edge|not available in this browser/);
    } finally {
      await b.close();
    }
  }, 180_000);
});
