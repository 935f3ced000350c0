// The page's device check in real headless Chromium: it measures the WebGPU and the wasm path
// in its worker and shows which one trains and why; the setting forces either; with WebGPU
// switched off it trains on wasm and explains how to get WebGPU.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { ViteDevServer } from 'vite';
import { launchChromium } from '../../testbed/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';

const deviceText = async (page: Page) => (await page.textContent('#device')) ?? '';

/** Waits for the probe to end (the device state set, the text no longer "Measuring"). */
async function probed(page: Page): Promise<string> {
  await page.waitForFunction(() => {
    const d = document.getElementById('donate')?.dataset.device;
    return d !== undefined && !/^Measuring/.test(document.getElementById('device')?.textContent ?? '')
      && (document.getElementById('donate')?.dataset.probing ?? '') === '';
  }, undefined, { timeout: 180_000 });
  return deviceText(page);
}

/** The device text when the page chose the faster path itself. */
const FASTER_WHY = new RegExp(
  /^Training on (WebGPU|WebAssembly SIMD \(CPU\)): .+\n/.source
  + /Why: (webgpu|wasm) is the faster path on this device: [0-9.]+ images\/s vs (webgpu|wasm) [0-9.]+ images\/s/.source,
);

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

  it('measures both paths, shows the faster and why; the setting forces either', async () => {
    const b = await launchChromium();
    try {
      const page = await (await b.newContext()).newPage();
      await page.goto(url);
      const text = await probed(page);
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.device), text).toBe('ok');
      expect(text).toMatch(FASTER_WHY);
      const chosen = await page.evaluate(() => document.getElementById('donate')!.dataset.backend);
      expect(text).toContain(`Why: ${chosen} is the faster path`);
      expect(await page.isDisabled('#toggle')).toBe(false);

      await page.selectOption('#backend', 'wasm');
      expect(await probed(page)).toMatch(/^Training on WebAssembly SIMD \(CPU\): .+\nWhy: wasm was chosen in the settings/);
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.backend)).toBe('wasm');
      await page.selectOption('#backend', 'webgpu');
      expect(await probed(page)).toMatch(/^Training on WebGPU: .+\nWhy: webgpu was chosen in the settings/);
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.backend)).toBe('webgpu');
    } finally {
      await b.close();
    }
  }, 400_000);

  it('without WebGPU it trains on wasm and says how to get WebGPU, without a stack trace', async () => {
    const b = await launchChromium({ args: ['--disable-features=WebGPU', '--disable-webgpu'] });
    try {
      const page = await (await b.newContext()).newPage();
      await page.addInitScript(() => {
        // Belt and braces: some builds still expose navigator.gpu with the switches above.
        Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });
      });
      await page.goto(url);
      const text = await probed(page);
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.device), text).toBe('ok');
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.backend)).toBe('wasm');
      expect(await page.isDisabled('#toggle'), 'Start works on the CPU path').toBe(false);
      expect(text).toMatch(/^Training on WebAssembly SIMD \(CPU\)/);
      expect(text).toMatch(/webgpu is not available/);
      expect(text).toMatch(/WebGPU is not available in this browser/);
      expect(text.split('WebGPU is not available in this browser').length - 1, 'the help is said once').toBe(1);
      expect(text).toMatch(/Chrome or Edge 113\+/);
      expect(text).not.toMatch(/at \w+ \(|\.ts:\d+/);

      // Forcing WebGPU here is refused with a reason, not a hang.
      await page.selectOption('#backend', 'webgpu');
      const forced = await probed(page);
      expect(await page.evaluate(() => document.getElementById('donate')!.dataset.device)).toBe('missing');
      expect(forced).toMatch(/the webgpu backend was asked for but is not available here: .*Choose 'auto'/);
    } finally {
      await b.close();
    }
  }, 300_000);
});
