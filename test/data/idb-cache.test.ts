// The volunteer's IndexedDB cache in headless Chromium (real IndexedDB): shards are read from
// the coordinator once and reused on later visits; damaged or cut-off entries are detected
// and fetched again; the byte budget evicts the least recently used shard; the job's
// checkpoint is kept per step and refused when damaged.
import { describe, expect, it } from 'vitest';
import { pageHost } from '../helpers/vite.ts';
import type { CacheReport } from './browser/idb-page.ts';

describe('IndexedDB cache in Chromium', () => {
  const host = pageHost();

  it('reuses, verifies, evicts and keeps checkpoints', async () => {
    const page = await (await host.browser.newContext()).newPage();
    await page.goto(`${host.origin}/test/data/browser/idb.html`);
    await page.waitForFunction(() => 'ready' in window);
    const r = (await page.evaluate(() => window.runCacheChecks())) as CacheReport;
    expect(r.firstReads, 'a, b and the manifest').toBe(3);
    expect(r.secondReads).toBe(0);
    expect(r.reopenedReads, 'a new visit reads nothing twice').toBe(0);
    expect(r.corruptRefetched).toBe(true);
    expect(r.cutRefetched).toBe(true);
    expect(r.evictedOldest).toBe(true);
    expect(r.checkpointKept).toBe(true);
    expect(r.damagedCheckpointRefused).toBe(true);
    expect(r.stats.corrupt).toBe(3);
    expect(r.stats.evicted).toBeGreaterThanOrEqual(1);
  });
});
