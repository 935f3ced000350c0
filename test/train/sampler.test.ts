// The sampler: which ids a step uses. Global sampling is bit-for-bit the permutation every job
// trained on before shard-local sampling existed; shard-local sampling keeps an epoch a
// permutation of the split while each step touches only a window of shards, stratified, and a
// step's ids depend on (seed, step, B, layout, window) alone.
import { describe, expect, it } from 'vitest';
import { makeRng } from '../../src/rng.ts';
import { makeShardIndex } from '../../src/data/manifest.ts';
import { epochPermutation, shardLocalStream, shardLocator, stepSamples, stepsPerEpoch, epochOrder, type Sampling } from '../../src/train/sampler.ts';

/** The global sampler as it was written before `sampling` existed (the reference). */
function oldStepSamples(seed: number, step: number, B: number, n: number): { epoch: number; ids: number[] } {
  const spe = Math.max(1, Math.floor(n / B));
  const epoch = Math.floor(step / spe);
  const p = new Uint32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  const rng = makeRng((seed * 2654435761 + epoch * 97 + 13) >>> 0);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = p[i]!;
    p[i] = p[j]!;
    p[j] = t;
  }
  const start = (step % spe) * B;
  return { epoch, ids: Array.from(p.subarray(start, start + B)) };
}

// Unequal shards, one empty, a short last one: 1,000 ids in 15 shards.
const SIZES = [80, 64, 90, 0, 72, 75, 66, 88, 70, 79, 61, 85, 68, 73, 29];
const N = SIZES.reduce((a, b) => a + b, 0);
const local = (window: number, sizes: readonly number[] = SIZES): Sampling => ({ kind: 'shard-local', shardSizes: sizes, window });

describe('global sampling', () => {
  it('is bit-for-bit the sampler every earlier job trained on', () => {
    for (const [seed, B, n] of [[0, 12, 500], [9, 12, 500], [7, 64, 1000], [123456789, 7, 50], [2 ** 32 - 1, 50, 50]] as const) {
      const spe = stepsPerEpoch(n, B);
      for (const step of [0, 1, spe - 1, spe, 2 * spe + 3]) {
        expect(stepSamples(seed, step, B, n)).toEqual(oldStepSamples(seed, step, B, n));
        expect(stepSamples(seed, step, B, n, { kind: 'global' })).toEqual(oldStepSamples(seed, step, B, n));
      }
    }
    // And outputs recorded from the sampler before `sampling` existed, should the reference above drift with it.
    expect(stepSamples(9, 0, 12, 500)).toEqual({ epoch: 0, ids: [214, 203, 373, 431, 386, 22, 56, 304, 309, 68, 282, 319] });
    expect(stepSamples(1, 3, 5, 20)).toEqual({ epoch: 0, ids: [13, 15, 4, 3, 6] });
  });
});

describe('shard-local sampling', () => {
  it('an epoch is a permutation of the split; its steps never repeat an id; each step touches at most 2 x window shards', () => {
    const B = 48;
    const W = 4;
    const spe = stepsPerEpoch(N, B);
    const shardOf = shardLocator(SIZES);
    for (const epoch of [0, 1]) {
      expect([...shardLocalStream(5, epoch, SIZES, W)].sort((a, b) => a - b)).toEqual(Array.from({ length: N }, (_, i) => i));
      const seen = new Set<number>();
      for (let s = epoch * spe; s < (epoch + 1) * spe; s++) {
        const { epoch: e, ids } = stepSamples(5, s, B, N, local(W));
        expect(e).toBe(epoch);
        expect(ids.length).toBe(B);
        expect(new Set(ids).size).toBe(B);
        for (const id of ids) {
          expect(seen.has(id)).toBe(false);
          seen.add(id);
        }
        expect(new Set(ids.map(shardOf)).size).toBeLessThanOrEqual(2 * W);
      }
      expect(seen.size).toBe(spe * B); // the last partial block of the epoch is dropped
    }
    // Epochs differ, and so do seeds.
    expect(stepSamples(5, 0, B, N, local(W)).ids).not.toEqual(stepSamples(5, spe, B, N, local(W)).ids);
    expect(stepSamples(5, 0, B, N, local(W)).ids).not.toEqual(stepSamples(6, 0, B, N, local(W)).ids);
  });

  it('inside a block any B consecutive ids take nearly equal shares of its shards (stratified)', () => {
    const sizes = Array.from({ length: 12 }, () => 100);
    const W = 4;
    const B = 40;
    const shardOf = shardLocator(sizes);
    for (let s = 0; s < stepsPerEpoch(1200, B); s++) {
      const { ids } = stepSamples(3, s, B, 1200, local(W, sizes));
      const counts = new Map<number, number>();
      for (const id of ids) counts.set(shardOf(id), (counts.get(shardOf(id)) ?? 0) + 1);
      // Blocks are 400 ids, a multiple of B: every step lies inside one block, 10 ids per shard.
      expect([...counts.values()]).toEqual([10, 10, 10, 10]);
    }
    // Unequal shards: each takes its share of the block in proportion to its size, within one id.
    const stream = shardLocalStream(4, 0, SIZES, 15); // one block: every shard
    for (const start of [0, 137, 500, 911]) {
      const counts = new Array<number>(SIZES.length).fill(0);
      const at = shardLocator(SIZES);
      for (const id of stream.subarray(start, start + 60)) counts[at(id)]!++;
      SIZES.forEach((m, k) => expect(Math.abs(counts[k]! - (60 * m) / N)).toBeLessThanOrEqual(1.5));
    }
  });

  it('a step\'s ids are a function of (seed, step, B, layout, window) only, whatever was computed before', () => {
    const fresh = stepSamples(11, 30, 32, N, local(5));
    // Fill and churn the caches with other seeds, epochs, windows and layouts.
    for (let seed = 0; seed < 6; seed++) stepSamples(seed, seed * 40, 32, N, local(3 + seed));
    stepSamples(11, 30, 32, N);
    stepSamples(11, 30, 32, 1000, local(5, [500, 500]));
    expect(stepSamples(11, 30, 32, N, local(5))).toEqual(fresh);
    // The window is part of the order.
    expect(stepSamples(11, 30, 32, N, local(6)).ids).not.toEqual(fresh.ids);
  });

  it('an ImageNet-sized epoch (1,281 shards, 1.28M ids) is built once and a step is cheap after it', () => {
    const sizes = Array.from({ length: 1281 }, (_, k) => (k === 1280 ? 167 : 1000));
    const n = sizes.reduce((a, b) => a + b, 0);
    const first = stepSamples(1, 7, 1024, n, local(16, sizes));
    expect(new Set(first.ids.map(shardLocator(sizes))).size).toBeLessThanOrEqual(32);
    expect(shardLocalStream(1, 0, sizes, 16)).toBe(shardLocalStream(1, 0, sizes, 16)); // cached
    const t0 = performance.now();
    for (let s = 8; s < 108; s++) stepSamples(1, s, 1024, n, local(16, sizes));
    expect(performance.now() - t0).toBeLessThan(2000); // 100 steps from the cache (about 1 ms each)
  });

  it('refuses a layout that is not the split\'s, or a window below 1, saying what to pass', () => {
    expect(() => stepSamples(1, 0, 10, N + 1, local(4))).toThrow(/hold 1000 samples but the split has 1001.*splits\.train\.shards/);
    expect(() => stepSamples(1, 0, 10, N, local(0))).toThrow(/window must be an integer >= 1/);
    expect(() => stepSamples(1, 0, 10, 20, local(2, [10, -1, 11]))).toThrow(/shard 1 has -1 samples/);
  });
});

describe('shardLocator', () => {
  it('maps an id to its shard as the manifest\'s shard index does (empty shards hold nothing)', () => {
    const index = makeShardIndex({ samples: N, shards: SIZES.map((samples, i) => ({ file: `train-${i}.tar`, samples, bytes: 1 })) });
    const shardOf = shardLocator(SIZES);
    for (let id = 0; id < N; id++) expect(shardOf(id)).toBe(index.locate(id).shard);
    expect(() => shardOf(N)).toThrow(/outside the 1000 ids/);
  });
});

describe('epochOrder', () => {
  it('orders an epoch ahead into the cache: the step that needs it gets the same order without shuffling again', () => {
    const warmed = epochOrder(77, 3, 5000);
    expect(epochPermutation(77, 3, 5000)).toBe(warmed);
    expect(stepSamples(77, 3 * 2, 2500, 5000).ids).toEqual(Array.from(warmed.subarray(0, 2500)));
    const local: Sampling = { kind: 'shard-local', shardSizes: [1000, 1500, 2500], window: 2 };
    const order = epochOrder(78, 3, 5000, local);
    expect(shardLocalStream(78, 3, [1000, 1500, 2500], 2)).toBe(order);
  });
});
