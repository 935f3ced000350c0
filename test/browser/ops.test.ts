// The op suites in real headless Chromium, inside a dedicated Web Worker, on software WebGPU
// (llvmpipe through ANGLE). Every case that runs in Node must run and pass here too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ViteDevServer } from 'vite';
import type { Page } from 'playwright-core';
import { launchChromium, type LaunchedBrowser } from '../helpers/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';
import { allSuites } from '../ops/suite.ts';
import type { CaseResult } from './ops-protocol.ts';

interface OpsResults { device?: string; software?: boolean; results: CaseResult[]; done: boolean; fatal?: string; total?: number }

describe('op suites in headless Chromium (dedicated Worker, WebGPU)', () => {
  let server: ViteDevServer;
  let browser: LaunchedBrowser;
  let page: Page;
  let state: OpsResults;

  beforeAll(async () => {
    const started = await startViteServer();
    server = started.server;
    browser = await launchChromium();
    const ctx = await browser.newContext();
    page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${started.origin}/test/browser/ops.html`);
    await page.waitForFunction(() => (window as unknown as { opsResults?: { done: boolean } }).opsResults?.done === true, undefined, { timeout: 900_000, polling: 500 });
    state = await page.evaluate(() => (window as unknown as { opsResults: OpsResults }).opsResults);
    if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
  }, 960_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('found a WebGPU adapter in the worker', () => {
    expect(state.fatal).toBeUndefined();
    expect(state.device).toBeDefined();
  });

  it('ran every case of every suite, and all passed', () => {
    const expected = allSuites().flatMap((s) => s.cases.map((c) => `${s.op}: ${c.name}`));
    const ran = state.results.map((r) => `${r.op}: ${r.name}`);
    expect(ran.sort()).toEqual(expected.sort());
    const failed = state.results.filter((r) => !r.ok).map((r) => `${r.op}: ${r.name}\n${r.error}`);
    expect(failed).toEqual([]);
  });
});
