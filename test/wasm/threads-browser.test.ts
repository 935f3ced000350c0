// The threaded wasm engine in real headless Chromium:
//  - vite's dev server sends COOP/COEP (vite.config.ts), so the test page is cross-origin
//    isolated; in a dedicated Worker the default WasmEngine runs min(4, hardwareConcurrency)
//    threads (nested Web Workers) with results bitwise equal to 1 thread; on the page's main
//    thread threads are refused with a clear error;
//  - the coordinator serves the BUILT page with the same headers: the page is cross-origin
//    isolated, its worker's wasm engine reports the threads, and it trains a step of a job
//    (its /api, /data and socket traffic work under COEP).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ViteDevServer } from 'vite';
import { buildPage } from '../../coordinator/main.ts';
import { buildTestData, startTestJob, tempRoot, testJob, type TestJob } from '../../testbed/jobs.ts';
import { launchChromium, type LaunchedBrowser } from '../../testbed/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';
import type { ThreadsResult } from './threads-protocol.ts';

let browser: LaunchedBrowser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe('vite dev server: the engine in a dedicated Worker', () => {
  let server: ViteDevServer;
  let origin = '';
  beforeAll(async () => {
    const s = await startViteServer();
    server = s.server;
    origin = s.origin;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('is cross-origin isolated, runs the default thread count bitwise equal to 1 thread, and refuses threads on the main thread', async () => {
    const res = await fetch(`${origin}/test/wasm/threads.html`);
    expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    expect(res.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${origin}/test/wasm/threads.html`);
    await page.waitForFunction(() => (window as unknown as { threadsResult?: ThreadsResult }).threadsResult?.done === true, undefined, { timeout: 120_000 });
    const r = await page.evaluate(() => (window as unknown as { threadsResult: ThreadsResult }).threadsResult);
    expect(r.error).toBeUndefined();
    expect(r.pageIsolated).toBe(true);
    expect(r.mainThreadError).toMatch(
      /threads need Atomics.wait, which this thread \(a page's main thread\) does not allow: create the engine in a Web Worker/,
    );
    const w = r.worker!;
    expect(w.crossOriginIsolated).toBe(true);
    const expected = Math.min(4, w.hardwareConcurrency);
    expect(expected, 'this machine has at least 2 cores').toBeGreaterThanOrEqual(2);
    expect(w.threads).toBe(expected);
    expect(w.description).toBe(`WebAssembly SIMD with FMA, ${expected} threads`);
    for (const c of w.cases) expect(c.equal, `${c.name}: ${expected} threads vs 1 thread`).toBe(true);
    expect(w.cases.length).toBe(4);
  }, 180_000);
});

describe('the coordinator serving the built page', () => {
  let root: { dir: string; remove(): Promise<void> };
  let job: TestJob;
  beforeAll(async () => {
    root = await tempRoot('wasm-threads');
    const data = await buildTestData(root.dir);
    const pageDir = await buildPage(join(root.dir, 'page'));
    job = await startTestJob(root.dir, 'job', data, testJob(3, { minPeers: 1 }), { pageDir });
  }, 300_000);
  afterAll(async () => {
    await job?.close();
    await root?.remove();
  });

  it('sends COOP/COEP on the page and its assets; the page is isolated and its worker trains on wasm with threads', async () => {
    const res = await fetch(`${job.url}/`);
    expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    expect(res.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(await res.text())?.[1];
    expect(script, 'the page loads a script from /assets').toBeDefined();
    const asset = await fetch(`${job.url}${script!}`);
    expect(asset.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
    const api = await fetch(`${job.url}/api/job`);
    expect(api.status).toBe(200);
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${job.url}/?name=threads&backend=wasm`);
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(true);
    const cores = await page.evaluate(() => navigator.hardwareConcurrency);
    const threads = Math.min(4, cores);
    await page.waitForFunction(() => document.getElementById('donate')?.dataset.device !== undefined, undefined, { timeout: 120_000 });
    const device = (await page.textContent('#device')) ?? '';
    expect(await page.evaluate(() => document.getElementById('donate')!.dataset.device), device).toBe('ok');
    expect(device).toContain(`WebAssembly SIMD with FMA, ${threads} threads`);
    await page.click('#toggle');
    const end = Date.now() + 240_000;
    while (job.driver.status().step < 1) {
      const state = await page.evaluate(() => document.getElementById('donate')?.dataset.state ?? '');
      if (state === 'error' || Date.now() > end) {
        throw new Error(`no step trained (page state ${state})\nstatus: ${await page.textContent('#status')}\ncoordinator: ${job.lines.slice(-20).join('\n')}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    await page.waitForFunction(() => /step \d+/.test(document.getElementById('status')?.textContent ?? ''), undefined, { timeout: 60_000 });
  }, 400_000);
});
