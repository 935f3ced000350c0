// The page's device check in real headless Chromium: with software WebGPU it reports the
// adapter and a measured speed; with WebGPU switched off it explains what to do instead.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ViteDevServer } from 'vite';
import { launchChromium } from '../helpers/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';

describe('index.html device check', () => {
  let server: ViteDevServer;
  let url = '';
  beforeAll(async () => {
    const started = await startViteServer();
    server = started.server;
    url = `${started.origin}/`;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('shows the adapter and a GEMM speed', async () => {
    const b = await launchChromium();
    try {
      const page = await (await b.newContext()).newPage();
      await page.goto(url);
      await page.waitForFunction(() => /GFLOP\/s|Could not|WebGPU is not/.test(document.getElementById('device')?.textContent ?? ''), undefined, { timeout: 120_000 });
      const text = await page.textContent('#device');
      expect(text).toMatch(/WebGPU adapter: .*\n.*GEMM 512x512x512: [0-9.]+ GFLOP\/s/);
    } finally {
      await b.close();
    }
  }, 180_000);

  it('explains what to do when WebGPU is unavailable, without a stack trace', async () => {
    const b = await launchChromium({ args: ['--disable-features=WebGPU', '--disable-webgpu'] });
    try {
      const page = await (await b.newContext()).newPage();
      await page.addInitScript(() => {
        // Belt and braces: some builds still expose navigator.gpu with the switches above.
        Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });
      });
      await page.goto(url);
      await page.waitForFunction(() => document.getElementById('donate')?.dataset.device !== undefined, undefined, { timeout: 60_000 });
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.device)).toBe('missing');
      expect(await page.isDisabled('#toggle'), 'no Start button without WebGPU').toBe(true);
      const text = (await page.textContent('#device')) ?? '';
      expect(text).toMatch(/WebGPU is not available in this browser/);
      expect(text).toMatch(/Chrome or Edge 113\+/);
      expect(text).not.toMatch(/at \w+ \(|\.ts:\d+/);
    } finally {
      await b.close();
    }
  }, 120_000);
});
