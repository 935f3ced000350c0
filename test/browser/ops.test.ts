// The op suites in real headless Chromium, inside a dedicated Web Worker, on every backend:
// software WebGPU (llvmpipe through ANGLE) and the WebAssembly engine, loaded the way the app
// loads them. Every case that runs in Node must run and pass here too, on each backend;
// GPU-only cases must be reported (as skipped) on the others. VT_OP_BACKENDS=webgpu,wasm
// restricts the backends, as in Node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ViteDevServer } from 'vite';
import type { Page } from 'playwright-core';
import type { BackendKind } from '../../src/backend/engine.ts';
import { launchChromium, type LaunchedBrowser } from '../../testbed/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';
import { allSuites, caseTitle, parseBackends, runsOn } from '../ops/suite.ts';
import type { OpsResults } from './ops-protocol.ts';

const BACKENDS = parseBackends(process.env.VT_OP_BACKENDS);
const WAIT_MS = 1_500_000;

describe(`op suites in headless Chromium (dedicated Worker; ${BACKENDS.join(', ')})`, () => {
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
    await page.goto(`${started.origin}/test/browser/ops.html?backends=${BACKENDS.join(',')}`);
    await page.waitForFunction(
      () => (window as unknown as { opsResults?: { done: boolean } }).opsResults?.done === true, undefined, { timeout: WAIT_MS, polling: 1000 },
    );
    state = await page.evaluate(() => (window as unknown as { opsResults: OpsResults }).opsResults);
    if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
    const took = (b: BackendKind): string => { const ms = state.times[b]; return ms === undefined ? 'did not finish' : `${(ms / 1000).toFixed(1)} s`; };
    console.log(`Chromium op suites: ${BACKENDS.map((b) => `${b} ${took(b)}`).join(', ')}`);
  }, WAIT_MS + 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('the worker finished', () => {
    expect(state.fatal).toBeUndefined();
  });

  for (const backend of BACKENDS) {
    describe(backend, () => {
      it(`loaded the ${backend} engine in the worker`, () => {
        expect(state.engineErrors.filter((x) => x.backend === backend)).toEqual([]);
        const loaded = state.engines.find((x) => x.backend === backend);
        expect(loaded).toBeDefined();
        expect(loaded!.reported).toBe(backend);
        expect(loaded!.platform).toBe('browser');
      });

      it('ran every case of every suite, and all passed', () => {
        const mine = state.results.filter((r) => r.backend === backend);
        const expected = allSuites().flatMap((s) => s.cases.map((c) => `${s.op}: ${caseTitle(c)}`));
        expect(mine.map((r) => `${r.op}: ${r.name}`).sort()).toEqual(expected.sort());
        const failed = mine.filter((r) => !r.ok).map((r) => `${r.op}: ${r.name}\n${r.error}`);
        expect(failed).toEqual([]);
      });

      it('skipped exactly the GPU-only cases (and only where the backend is not WebGPU)', () => {
        const skipped = state.results.filter((r) => r.backend === backend && r.skipped).map((r) => `${r.op}: ${r.name}`);
        const expected = allSuites().flatMap((s) => s.cases.filter((c) => !runsOn(c, backend)).map((c) => `${s.op}: ${caseTitle(c)}`));
        expect(skipped.sort()).toEqual(expected.sort());
      });
    });
  }
});
