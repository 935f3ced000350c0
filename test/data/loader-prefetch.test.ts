// Loading ahead (src/data/prefetch.ts) over a real BatchLoader on real MNIST shards behind a
// slow source: a hinted batch is ready when its step comes (no wait) and equals, bit for bit,
// the batch loaded without a hint; a wrong hint (other ids, other epoch) is discarded and the
// right batch loaded, its shards staying cached; a failed hinted load never fails the step;
// hints are bounded. Beside it: the byte count below the caches (fetchedBytes) grows only on
// misses, and the loader's in-memory budget holds; and warmAll, which loads a data set that
// fits the cache before the first step.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildShards } from '../../coordinator/data/cli.ts';
import { countingSource } from '../../src/data/counting-source.ts';
import { nodeDecoder, nodeGunzip } from '../../src/data/decode-node.ts';
import { DiskShardCache } from '../../src/data/disk-cache.ts';
import { BatchLoader, defaultAugment, type Batch } from '../../src/data/loader.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { fileShardSource } from '../../src/data/node-source.ts';
import { Prefetcher } from '../../src/data/prefetch.ts';
import { loadManifest, type ShardSource } from '../../src/data/source.ts';
import { tempDir } from './helpers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const DELAY_MS = 150;

/** `inner` with every shard read delayed (the manifest is not). */
function slowSource(inner: ShardSource, ms = DELAY_MS): ShardSource {
  return { origin: inner.origin, read: async (f) => { if (f !== 'manifest.json') await sleep(ms); return inner.read(f); } };
}

let dir = '';
let manifest: Manifest;
/** 100 images per shard: ids 0-99 in shard 0, 100-199 in shard 1, 200-299 in shard 2. */
const ids = (shard: number, n = 8, off = 0) => Array.from({ length: n }, (_, i) => shard * 100 + off + i * 7);

function loader(source: ShardSource, cacheBytes?: number): BatchLoader {
  return new BatchLoader({
    manifest, source, decoder: nodeDecoder, gunzip: nodeGunzip, split: 'train', augment: defaultAugment(manifest, 'train'), seed: 3,
    ...(cacheBytes ? { cacheBytes } : {}),
  });
}

function expectSameBatch(got: Batch, want: Batch): void {
  expect(got.shape).toEqual(want.shape);
  expect(Array.from(got.labels)).toEqual(Array.from(want.labels));
  const a = new Uint32Array(got.x.buffer, got.x.byteOffset, got.x.length);
  const b = new Uint32Array(want.x.buffer, want.x.byteOffset, want.x.length);
  const at = a.findIndex((v, i) => v !== b[i]);
  expect(at, `first differing float at ${at}`).toBe(-1);
}

beforeAll(async () => {
  dir = await tempDir('prefetch');
  manifest = await buildShards({ dataset: 'mnist', out: dir, limit: 300, samplesPerShard: 100, progress: false });
  expect(manifest.splits.train.shards.length).toBe(3);
}, 60_000);

describe('prefetch', () => {
  it('a hinted batch is ready when its step comes, and equals the batch loaded without a hint', async () => {
    const reference = loader(fileShardSource(dir));
    const batches = new Prefetcher(loader(slowSource(fileShardSource(dir))));
    // Step 1: nothing hinted, the step waits for the slow source.
    const first = await batches.take(ids(0), 0);
    expect(first.prefetched).toBe(false);
    expect(first.waitMs).toBeGreaterThanOrEqual(DELAY_MS - 5);
    // Its assignment announced step 2 (another shard): loaded while step 1 "computes".
    expect(batches.hint(ids(1), 0)).toBe(true);
    expect(batches.hint(ids(1), 0), 'the same hint twice is one load').toBe(false);
    await sleep(3 * DELAY_MS);
    const second = await batches.take(ids(1), 0);
    expect(second.prefetched).toBe(true);
    expect(second.waitMs, 'step 2 did not wait for its data').toBe(0);
    expectSameBatch(second.batch, await reference.load(ids(1), 0));
    expectSameBatch(first.batch, await reference.load(ids(0), 0));
    // A hint still loading when its step comes: the step waits only for the rest.
    batches.hint(ids(2), 1);
    await sleep(DELAY_MS / 2);
    const third = await batches.take(ids(2), 1);
    expect(third.prefetched).toBe(true);
    expect(third.waitMs).toBeLessThan(DELAY_MS);
    expectSameBatch(third.batch, await reference.load(ids(2), 1));
  });

  it('a wrong hint (other ids or another epoch) is discarded, the right batch loaded; its shards stay cached', async () => {
    const reference = loader(fileShardSource(dir));
    const counted = countingSource(slowSource(fileShardSource(dir)));
    const batches = new Prefetcher(loader(counted));
    batches.hint(ids(2), 0);
    await sleep(3 * DELAY_MS);
    const files = counted.files;
    // The step came with other ids: shard 0's.
    const got = await batches.take(ids(0), 0);
    expect(got.prefetched).toBe(false);
    expect(got.waitMs).toBeGreaterThanOrEqual(DELAY_MS - 5);
    expectSameBatch(got.batch, await reference.load(ids(0), 0));
    expect(batches.size, 'the wrong hint is gone').toBe(0);
    // Shard 2 (the wrong hint's) is still in the loader's cache: its ids cost no read.
    const fromCache = await batches.take(ids(2, 8, 3), 0);
    expect(counted.files, 'only shard 0 was read after the hint').toBe(files + 1);
    expectSameBatch(fromCache.batch, await reference.load(ids(2, 8, 3), 0));
    // Same ids, another epoch (another augmentation): not used.
    batches.hint(ids(1), 4);
    await sleep(3 * DELAY_MS);
    const epoch5 = await batches.take(ids(1), 5);
    expect(epoch5.prefetched).toBe(false);
    expectSameBatch(epoch5.batch, await reference.load(ids(1), 5));
  });

  it('a hinted load that fails costs nothing but the hint: the step loads its batch itself', async () => {
    const inner = fileShardSource(dir);
    let failNext = true;
    const flaky: ShardSource = {
      origin: inner.origin,
      read: async (f) => { if (f !== 'manifest.json' && failNext) { failNext = false; throw new Error('connection reset'); } return inner.read(f); },
    };
    const errors: string[] = [];
    const batches = new Prefetcher(loader(flaky), { onError: (e) => errors.push(e instanceof Error ? e.message : String(e)) });
    batches.hint(ids(1), 0);
    await sleep(50);
    expect(errors).toEqual(['connection reset']);
    const got = await batches.take(ids(1), 0);
    expect(got.prefetched).toBe(false);
    expectSameBatch(got.batch, await loader(inner).load(ids(1), 0));
  });

  it('is bounded: no more than maxLoads hinted loads at once, taken or dropped ones included', async () => {
    const batches = new Prefetcher(loader(slowSource(fileShardSource(dir))), { maxLoads: 2 });
    expect(batches.hint(ids(0), 0)).toBe(true);
    expect(batches.hint(ids(1), 0)).toBe(true);
    expect(batches.hint(ids(2), 0), 'two loads under way already').toBe(false);
    expect(batches.hint([], 0), 'nothing to load').toBe(false);
    // Taking one drops the other, which still runs: still no room until they finish.
    const taken = batches.take(ids(0), 0);
    expect(batches.hint(ids(2), 0)).toBe(false);
    await taken;
    await sleep(2 * DELAY_MS);
    expect(batches.hint(ids(2), 0)).toBe(true);
    expect(() => new Prefetcher(loader(fileShardSource(dir)), { maxLoads: 0 })).toThrow(RangeError);
  });

  it('looks two steps ahead: taking one keeps the hints given after it, drops those before', async () => {
    const batches = new Prefetcher(loader(slowSource(fileShardSource(dir))), { maxLoads: 3 });
    batches.hint(ids(0), 9); // a stale hint (its step went by)
    batches.hint(ids(1), 0);
    batches.hint(ids(2), 0);
    await sleep(3 * DELAY_MS);
    expect((await batches.take(ids(1), 0)).waitMs).toBe(0);
    expect(batches.size, 'the stale hint is gone, the one further ahead stays').toBe(1);
    expect((await batches.take(ids(2), 0)).waitMs).toBe(0);
    expect(batches.size).toBe(0);
  });
});

describe('bytes fetched and memory held', () => {
  it('the count below the caches grows only on misses (memory or disk), also after a restart', async () => {
    const cacheDir = await tempDir('prefetch-disk');
    const counted = countingSource(fileShardSource(dir));
    const disk = new DiskShardCache(cacheDir, 1e9, 'mnist').shards(counted);
    await loadManifest(disk);
    const manifestBytes = counted.bytes;
    const a = loader(disk);
    await a.load([...ids(0), ...ids(1)], 0);
    const twoShards = counted.bytes - manifestBytes;
    expect(twoShards).toBeGreaterThan(0);
    await a.load(ids(0, 4, 1), 1); // memory hit
    expect(counted.bytes - manifestBytes).toBe(twoShards);
    // A restart: a new loader (empty memory) on a new disk cache object over the same folder.
    const disk2 = new DiskShardCache(cacheDir, 1e9, 'mnist').shards(counted);
    await loadManifest(disk2);
    const b = loader(disk2);
    await b.load([...ids(0), ...ids(1)], 0);
    expect(counted.bytes - 2 * manifestBytes, 'disk hits cost nothing').toBe(twoShards);
    await b.load(ids(2), 0);
    expect(counted.bytes - 2 * manifestBytes).toBeGreaterThan(twoShards);
  });

  it('the in-memory budget keeps only what fits (the newest shard at least), loads stay right', async () => {
    const reference = loader(fileShardSource(dir));
    const small = loader(slowSource(fileShardSource(dir), 20), 1);
    const got = await small.load([...ids(0, 2), ...ids(1, 2), ...ids(2, 2)], 0);
    expectSameBatch(got, await reference.load([...ids(0, 2), ...ids(1, 2), ...ids(2, 2)], 0));
    expect(small.cachedBytes).toBeGreaterThan(0);
    const all = reference.cachedBytes;
    expect(small.cachedBytes, 'one shard of three').toBeLessThan(all / 2);
    expect(() => loader(fileShardSource(dir), -1)).toThrow(RangeError);
  });
});

describe('warmAll: a data set that fits the cache loads before the first step', () => {
  const shardBytes = () => manifest.splits.train.shards.reduce((n, s) => n + s.bytes, 0);

  it('starts every shard once; a batch after it fetches nothing and equals one loaded cold', async () => {
    const counted = countingSource(slowSource(fileShardSource(dir)));
    const warm = loader(counted);
    expect(warm.warmAll()).toBe(3);
    expect(warm.warmAll()).toBe(0); // started already: nothing again
    await sleep(DELAY_MS + 400);
    expect(counted.files).toBe(3);
    const got = await warm.load([...ids(0, 3), ...ids(2, 3)], 1);
    expect(counted.files).toBe(3);
    expectSameBatch(got, await loader(fileShardSource(dir)).load([...ids(0, 3), ...ids(2, 3)], 1));
  });

  it('leaves a data set alone whose shard files take more than 1/16 of the cache', () => {
    const counted = countingSource(fileShardSource(dir));
    expect(loader(counted, 16 * shardBytes() - 1).warmAll()).toBe(0);
    expect(counted.files).toBe(0);
    expect(loader(countingSource(fileShardSource(dir)), 16 * shardBytes()).warmAll()).toBe(3);
  });

  it('forgets a shard whose fetch failed: the batch that needs it fetches it again', async () => {
    let failing = true;
    const inner = fileShardSource(dir);
    const flaky: ShardSource = {
      origin: inner.origin, read: async (f) => { if (failing && f !== 'manifest.json') throw new Error('network down'); return inner.read(f); },
    };
    const warm = loader(flaky);
    expect(warm.warmAll()).toBe(3);
    await sleep(50);
    failing = false;
    expectSameBatch(await warm.load(ids(1, 4), 0), await loader(fileShardSource(dir)).load(ids(1, 4), 0));
  });
});
