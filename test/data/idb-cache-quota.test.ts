// The IndexedDB shard cache against a REAL quota: headless Chromium with this origin's quota
// forced small through the DevTools protocol (Storage.overrideQuotaForOrigin), so that a write
// really aborts with QuotaExceededError. The cache must evict least recently used shards and
// retry, serve a shard it cannot keep uncached (the bytes still right), never fail a read, and
// leave a consistent database (every shard with its meta record, sizes adding up) that a page
// reload finds intact. The budget it derives from navigator.storage.estimate() is checked too.
//
// The page's own estimate() does not show the override (an incognito context reports a fixed
// quota), which is the case the cache must survive: a budget that the browser then refuses.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { pageHost } from '../helpers/vite.ts';
import type * as IdbCache from '../../src/data/idb-cache.ts';

/** What the page gets from the init script: the module, and shard bytes that do not compress. */
interface QuotaWindow {
  vtCache(): Promise<typeof IdbCache>;
  vtBytes(file: string, n: number): Uint8Array;
}

const KB = 1024;
const NAME = 'vt-quota-test';
const ORIGIN_DIR = 'http://coordinator/data/imagenet/';

/**
 * Installed in the page before its scripts, on every load (reloads too). The module import is
 * given as text: vitest would rewrite an import() written here into its own loader.
 */
const IMPORT_SCRIPT = "window.vtCache = () => import('/src/data/idb-cache.ts');";
function initScript(): void {
  const w = window as unknown as QuotaWindow;
  w.vtBytes = (file, n) => {
    // xorshift32 seeded by the name: random enough that IndexedDB's compression cannot shrink it.
    let x = 2166136261;
    for (let i = 0; i < file.length; i++) x = Math.imul(x ^ file.charCodeAt(i), 16777619) >>> 0;
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
      out[i] = x & 255;
    }
    return out;
  };
}

describe('IndexedDB cache under a real quota (Chromium)', () => {
  const host = pageHost();

  async function openPage(): Promise<{ page: Page; errors: string[]; setQuota(bytes: number): Promise<void> }> {
    const context = await host.browser.newContext();
    await context.addInitScript({ content: IMPORT_SCRIPT });
    await context.addInitScript(initScript);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${host.origin}/test/data/browser/idb.html`);
    const cdp = await context.newCDPSession(page);
    return {
      page, errors,
      async setQuota(quotaSize) {
        await cdp.send('Storage.overrideQuotaForOrigin', { origin: host.origin, quotaSize });
        const q = await cdp.send('Storage.getUsageAndQuota', { origin: host.origin });
        expect(q.overrideActive, 'the quota override took effect').toBe(true);
        expect(q.quota).toBe(quotaSize);
      },
    };
  }

  it('derives its budget from navigator.storage.estimate()', async () => {
    const { page } = await openPage();
    const r = await page.evaluate(async ({ name }) => {
      const { VolunteerCache } = await (window as unknown as QuotaWindow).vtCache();
      // A stub estimate: 600 kB left of 1 MB; half of it is the budget (nothing held yet).
      const small = await VolunteerCache.open(10 * 2 ** 20, `${name}-est`, { estimate: async () => ({ quota: 1_000_000, usage: 400_000 }) });
      const derived = small.budgetBytes;
      small.close();
      // The browser's own estimate: min(configured, a share of what is left).
      const e = await navigator.storage.estimate();
      const real = await VolunteerCache.open(2 ** 40, `${name}-real`, { quotaShare: 0.25 });
      const fromBrowser = real.budgetBytes;
      real.close();
      return { derived, fromBrowser, want: 0.25 * ((e.quota ?? 0) - (e.usage ?? 0)) };
    }, { name: NAME });
    expect(r.derived).toBe(300_000);
    expect(r.fromBrowser).toBeGreaterThan(0);
    expect(Math.abs(r.fromBrowser - r.want) / r.want, 'budget = quotaShare x (quota - usage)').toBeLessThan(0.01);
  });

  it('a shard the browser refuses even in an empty cache is served uncached; a small one is still kept', async () => {
    // Chromium's usage count lags a refused write now and then (on a loaded machine it has
    // refused the small shard too, right after the large one, three times running in one
    // context): the scenario runs again in a fresh browser context (its own storage and usage
    // count) on a fresh database, at most three times, and must keep the small shard in one.
    let errors: string[] = [];
    const attempt = async (name: string) => {
      const opened = await openPage();
      errors = opened.errors;
      // A quota well above the small shard: LevelDB's own files count against it too (at 100 KiB
      // the browser refused the 20 KiB shard about half the time).
      await opened.setQuota(400 * KB);
      return opened.page.evaluate(async ({ name, dir }) => {
        const w = window as unknown as QuotaWindow;
        const { VolunteerCache } = await w.vtCache();
        const reads: string[] = [];
        const sizeOf = (f: string) => (f === 'large' ? 600 * 1024 : 20 * 1024);
        const cache = await VolunteerCache.open(2 * 2 ** 20, name, { estimate: async () => ({ quota: 2 ** 40, usage: 0 }) });
        const src = cache.shards({ origin: dir, read: async (f: string) => { reads.push(f); return w.vtBytes(f, sizeOf(f)); } });
        const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);
        const largeOk = same(await src.read('large'), w.vtBytes('large', sizeOf('large')));
        const afterLarge = { ...cache.stats };
        const smallOk = same(await src.read('small'), w.vtBytes('small', sizeOf('small')));
        await src.read('small');
        await src.read('large');
        const stats = { ...cache.stats };
        const held = await cache.heldBytes();
        cache.close();
        if (held !== 20 * 1024) await new Promise((res) => {
          const q = indexedDB.deleteDatabase(name);
          q.onsuccess = q.onerror = q.onblocked = () => res(null);
        });
        return { largeOk, smallOk, afterLarge, stats, held, reads, lastError: cache.lastError };
        }, { name, dir: ORIGIN_DIR });
    };
    let r = await attempt(`${NAME}-tiny`);
    for (let i = 1; i < 3 && r.held !== 20 * KB; i++) {
      console.warn(`idb quota: the browser refused the small shard too (${r.lastError}); again in a fresh context`);
      r = await attempt(`${NAME}-tiny-${i}`);
    }
    expect(r.largeOk && r.smallOk, 'the bytes are right, kept or not').toBe(true);
    expect(r.afterLarge.quotaErrors, `the browser refused it (${r.lastError})`).toBeGreaterThanOrEqual(1);
    expect(r.afterLarge.uncached).toBe(1);
    expect(r.held, 'only the small shard is kept').toBe(20 * KB);
    expect(r.reads, 'the small shard is a hit the second time, the large one is fetched again').toEqual(['large', 'small', 'large']);
    expect(errors).toEqual([]);
  });

  it('evicts and retries on QuotaExceededError, serves what it cannot keep uncached, and a reload finds it consistent', async () => {
    const { page, errors, setQuota } = await openPage();
    // Room for about three 120 KiB shards; the cache's own budget (2 MiB) thinks it has more.
    await setQuota(480 * KB);
    const first = await page.evaluate(async ({ name, dir, size }) => {
      const w = window as unknown as QuotaWindow;
      const { VolunteerCache } = await w.vtCache();
      const reads: string[] = [];
      const sizeOf = (file: string) => (file === 'big' ? 4 * size : size);
      const inner = { origin: dir, read: async (file: string) => { reads.push(file); return w.vtBytes(file, sizeOf(file)); } };
      const cache = await VolunteerCache.open(2 * 2 ** 20, name, { estimate: async () => ({ quota: 2 ** 40, usage: 0 }) });
      const src = cache.shards(inner);
      const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);
      let wrong = 0;
      const check = async (f: string) => { if (!same(await src.read(f), w.vtBytes(f, size))) wrong++; };
      // One at a time, then four at once (their writes queue one behind the other).
      for (const f of ['s0', 's1', 's2', 's3', 's4']) await check(f);
      await Promise.all(['s5', 's6', 's7', 's8'].map(check));
      const afterFill = { ...cache.stats, budget: cache.budgetBytes, lastError: cache.lastError };
      // The most recent shard is a hit; the first ones were evicted to make room.
      const before = reads.length;
      await check('s8');
      const s8Hit = reads.length === before;
      await check('s0');
      const s0Refetched = reads.length === before + 1;
      // One shard bigger than the whole quota: served, not kept, nothing else lost to it.
      const big = 'big';
      const bigOk = same(await src.read(big), w.vtBytes(big, 4 * size));
      const stats = { ...cache.stats };
      cache.close();
      return { wrong, afterFill, s8Hit, s0Refetched, bigOk, stats, budget: cache.budgetBytes };
    }, { name: NAME, dir: ORIGIN_DIR, size: 120 * KB });
    console.log(`under a ${480} KiB quota: ${JSON.stringify(first.stats)}, budget ${first.budget} bytes`);
    expect(first.wrong, 'every read returned the right bytes').toBe(0);
    expect(first.afterFill.quotaErrors, `the browser refused writes (${first.afterFill.lastError})`).toBeGreaterThanOrEqual(1);
    expect(first.afterFill.lastError).toMatch(/QuotaExceededError/);
    expect(first.afterFill.evicted, 'least recently used shards made room').toBeGreaterThanOrEqual(5);
    expect(first.afterFill.budget, 'the budget shrank to what the browser holds').toBeLessThan(480 * KB);
    expect(first.s8Hit, 'the newest shard was kept').toBe(true);
    expect(first.s0Refetched, 'the oldest was evicted').toBe(true);
    expect(first.bigOk).toBe(true);
    expect(first.stats.uncached, 'the big shard was served uncached').toBeGreaterThanOrEqual(1);

    // A reload: a fresh cache object on the same database, still under the small quota.
    await page.reload();
    const second = await page.evaluate(async ({ name, dir, size }) => {
      const w = window as unknown as QuotaWindow;
      const { VolunteerCache, DB_VERSION } = await w.vtCache();
      const raw: IDBDatabase = await new Promise((res, rej) => {
        const q = indexedDB.open(name, DB_VERSION);
        q.onsuccess = () => res(q.result);
        q.onerror = () => rej(q.error);
      });
      const all = <T,>(store: string) => new Promise<T[]>((res, rej) => {
        const q = raw.transaction(store).objectStore(store).getAll();
        q.onsuccess = () => res(q.result as T[]);
        q.onerror = () => rej(q.error);
      });
      const shards = await all<{ key: string; bytes: Uint8Array }>('shards');
      const metas = await all<{ key: string; size: number }>('shardMeta');
      raw.close();
      const sizes = new Map(metas.map((m) => [m.key, m.size]));
      const consistent = shards.length === metas.length && shards.every((s) => sizes.get(s.key) === s.bytes.byteLength);
      const held = shards.reduce((n, s) => n + s.bytes.byteLength, 0);
      const reads: string[] = [];
      const cache = await VolunteerCache.open(2 * 2 ** 20, name, { estimate: async () => ({ quota: 2 ** 40, usage: 0 }) });
      const src = cache.shards({ origin: dir, read: async (f: string) => { reads.push(f); return w.vtBytes(f, size); } });
      let wrong = 0;
      for (const s of shards) {
        const f = s.key.slice(dir.length);
        const got = await src.read(f);
        const want = w.vtBytes(f, size);
        if (got.length !== size || got.some((v, i) => v !== want[i])) wrong++;
      }
      const stats = { ...cache.stats };
      cache.close();
      return { keys: shards.map((s) => s.key.slice(dir.length)).sort(), consistent, held, wrong, reads, stats };
    }, { name: NAME, dir: ORIGIN_DIR, size: 120 * KB });
    expect(second.consistent, 'every shard has its meta record with its size').toBe(true);
    expect(second.keys.length, `kept: ${second.keys.join(', ')}`).toBeGreaterThanOrEqual(2);
    expect(second.keys).toContain('s8');
    expect(second.keys).not.toContain('big');
    expect(second.held).toBeLessThanOrEqual(480 * KB);
    expect(second.wrong).toBe(0);
    expect(second.reads, 'after the reload every kept shard is a hit').toEqual([]);
    expect(second.stats).toMatchObject({ corrupt: 0, hits: second.keys.length });
    expect(errors, 'no uncaught error in the page').toEqual([]);
  });
});
