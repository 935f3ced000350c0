// Real browsers: 3 headless Chromium pages (separate contexts = separate people) form a ring
// through the real PeerJS server and sum 1M floats with the same src/comm code as Node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ViteDevServer } from 'vite';
import { startSignalingServer, type StandaloneSignaling } from '../../coordinator/signaling.ts';
import { launchChromium, type LaunchedBrowser } from '../../testbed/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';
import type { RunArgs, RunResult } from './browser/page.ts';

let sig: StandaloneSignaling;
let vite: ViteDevServer;
let chrome: LaunchedBrowser;
let pageUrl = '';

beforeAll(async () => {
  sig = await startSignalingServer({ path: '/signal' });
  const started = await startViteServer({ configFile: false, root: process.cwd(), logLevel: 'error', optimizeDeps: { include: ['peerjs'] } });
  vite = started.server;
  pageUrl = `${started.origin}/test/comm/browser/index.html`;
  chrome = await launchChromium();
});

afterAll(async () => {
  await chrome?.close();
  await vite?.close();
  await sig?.close();
});

describe('ring all-reduce in headless Chromium', () => {
  it('3 pages, 1M floats: correct sum, bitwise equal on every page', async () => {
    const ids = ['b0', 'b1', 'b2'];
    const pages = await Promise.all(ids.map(async () => {
      const ctx = await chrome.newContext();
      const page = await ctx.newPage();
      page.on('pageerror', (e) => console.error('page error:', e.message));
      await page.goto(pageUrl);
      await page.waitForFunction(() => window.ready === true, undefined, { timeout: 60_000 });
      return page;
    }));
    // Every page's outcome, so a failure shows each end's view of its links (which end was not heard), not only the first to fail.
    const settled = await Promise.allSettled(pages.map((page, i) => {
      const { id, token } = sig.signaling.issue(ids[i]);
      const args: RunArgs = { id, token, ids, signalPort: sig.port, length: 1 << 20 };
      return page.evaluate((a) => window.runRing(a), args);
    }));
    const why = (e: unknown): string => (e instanceof Error ? e.message : String(e));
    const failed = settled.flatMap((r, i) => (r.status === 'rejected' ? [`${ids[i]}: ${why(r.reason)}`] : []));
    if (failed.length) throw new Error(`pages failed:\n${failed.join('\n')}`);
    const results = settled.map((r) => (r as PromiseFulfilledResult<RunResult>).value);
    console.log('browser ring 3 x 1M floats, ms per page:', results.map((r) => r.ms.toFixed(0)).join(', '));
    for (const r of results) {
      expect(r.changed).toBe(true);
      expect(r.worstRel, `worst at ${r.worstIndex}`).toBeLessThanOrEqual(3 * 2 ** -24 * 2);
      expect(r.hash).toBe(results[0].hash);
    }
    await Promise.all(pages.map((p) => p.context().close()));
  });
});
