// Shard affinity (coordinator/affinity.ts): a step's ids over the ring by the shards each peer
// holds. Slices follow the speed split exactly, the result is deterministic, a leaver's shards
// go to a joiner, and over an epoch a shard is downloaded by about one peer.
import { describe, expect, it } from 'vitest';
import { affinityCapacity, assignByAffinity, emptyAffinity, type AffinityInput, type AffinityState } from '../../coordinator/affinity.ts';
import { splitBatch } from '../../coordinator/job.ts';
import { makeRng } from '../../src/rng.ts';
import { shardLocator, stepSamples, stepsPerEpoch } from '../../src/train/sampler.ts';

const state = (held: Record<string, number[]>): AffinityState => ({ held: new Map(Object.entries(held)) });
const sorted = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);

describe('assignByAffinity', () => {
  it('slices hold every id once, in the sampler\'s order, exactly the targets, deterministically (random cases)', () => {
    const rng = makeRng(17);
    for (let c = 0; c < 60; c++) {
      const P = 1 + rng.int(5);
      const ring = Array.from({ length: P }, (_, i) => `p${i}`);
      const B = P + rng.int(60);
      const ids = Array.from({ length: B }, (_, i) => i * 3 + rng.int(3));
      const shardOf = (id: number) => id % (1 + (c % 9)) + Math.floor(id / 50);
      const targets = splitBatch(B, ring.map(() => 0.2 + rng.next()));
      if (c % 5 === 0 && P > 1) {
        targets[0] = targets[0]! + targets[P - 1]!; // a member with nothing to do
        targets[P - 1] = 0;
      }
      const before = state(Object.fromEntries(ring.map((id) => [id, Array.from({ length: rng.int(4) }, () => rng.int(12))])));
      const input: AffinityInput = { ids, shardOf, ring, targets, capacity: 1 + rng.int(6) };
      const r = assignByAffinity(before, input);
      expect(r.slices.map((s) => s.length)).toEqual(targets);
      expect(sorted(r.slices.flat())).toEqual(sorted(ids));
      for (const s of r.slices) expect(s).toEqual([...s].sort((a, b) => ids.indexOf(a) - ids.indexOf(b)));
      expect(assignByAffinity(before, input)).toEqual(r);
      for (const id of ring) expect(r.state.held.get(id)!.length).toBeLessThanOrEqual(input.capacity);
    }
  });

  it('gives a held shard to its holder, and a leaver\'s shards to the joiner', () => {
    const ids = [0, 10, 20, 30, 40, 50, 1, 11, 21, 31, 41, 51, 2, 12, 22, 32, 42, 52, 3, 13, 23, 33, 43, 53]; // 4 ids of each shard 0..5
    const shardOf = (id: number) => Math.floor(id / 10);
    const before = state({ a: [0, 1], b: [2, 3], c: [4, 5] });
    const steady = assignByAffinity(before, { ids, shardOf, ring: ['a', 'b', 'c'], targets: [8, 8, 8], capacity: 4 });
    expect(steady.slices.map((s) => [...new Set(s.map(shardOf))])).toEqual([[0, 1], [2, 3], [4, 5]]);
    expect(steady.fetches).toBe(0);
    // b left, d joined (a new generation: a, c, d).
    const r = assignByAffinity(steady.state, { ids, shardOf, ring: ['a', 'c', 'd'], targets: [8, 8, 8], capacity: 4 });
    expect(r.slices.map((s) => [...new Set(s.map(shardOf))])).toEqual([[0, 1], [4, 5], [2, 3]]);
    expect(r.fetches).toBe(2);
    expect([...r.state.held.keys()]).toEqual(['a', 'c', 'd']); // the leaver is forgotten
    expect(r.state.held.get('d')).toEqual([2, 3]);
  });

  it('balances to the targets through shards the receiver holds before fetching new ones', () => {
    const ids = [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15];
    const shardOf = (id: number) => Math.floor(id / 10);
    // a holds both shards, b holds shard 1: shard 1 fills b's target and the rest of a's, no download.
    const r = assignByAffinity(state({ a: [0, 1], b: [1] }), { ids, shardOf, ring: ['a', 'b'], targets: [8, 4], capacity: 4 });
    expect(r.fetches).toBe(0);
    expect(r.slices).toEqual([[0, 1, 2, 3, 4, 5, 14, 15], [10, 11, 12, 13]]);
    // b needs more than shard 1 has: two ids of shard 0 move to it (one download).
    const more = assignByAffinity(state({ a: [0, 1], b: [1] }), { ids, shardOf, ring: ['a', 'b'], targets: [4, 8], capacity: 4 });
    expect(more.fetches).toBe(1);
    expect(more.slices).toEqual([[0, 1, 2, 3], [4, 5, 10, 11, 12, 13, 14, 15]]);
    // Nobody holds anything: shards spread by deficit, then one shard split to meet the targets.
    const fresh = assignByAffinity(emptyAffinity(), { ids, shardOf, ring: ['a', 'b'], targets: [4, 8], capacity: 4 });
    expect(fresh.slices.map((s) => s.length)).toEqual([4, 8]);
    expect(fresh.fetches).toBe(3);
  });

  it('keeps at most `capacity` shards per peer, dropping the least recently used', () => {
    const shardOf = (id: number) => Math.floor(id / 10);
    const r = assignByAffinity(state({ a: [7, 8, 9] }), { ids: [90, 30, 31, 40], shardOf, ring: ['a'], targets: [4], capacity: 3 });
    expect(r.state.held.get('a')).toEqual([9, 3, 4]);
    expect(r.fetches).toBe(2);
  });

  it('refuses targets that do not add up, naming the numbers', () => {
    const input = { ids: [1, 2, 3], shardOf: () => 0, ring: ['a', 'b'], capacity: 2 };
    expect(() => assignByAffinity(emptyAffinity(), { ...input, targets: [1, 1] })).toThrow(/targets sum to 2, the step has 3 ids/);
    expect(() => assignByAffinity(emptyAffinity(), { ...input, targets: [3] })).toThrow(/1 targets for a ring of 2/);
    expect(() => assignByAffinity(emptyAffinity(), { ...input, targets: [3, 0], capacity: 0 })).toThrow(/capacity must be an integer >= 1/);
  });
});

/** Shard downloads over one epoch divided by the shards: 1 is ideal (each shard fetched once). */
function downloadsOverIdeal(sizes: readonly number[], B: number, speeds: readonly number[], window: number): number {
  const n = sizes.reduce((a, b) => a + b, 0);
  const shardOf = shardLocator(sizes);
  const ring = speeds.map((_, i) => `p${i}`);
  const targets = splitBatch(B, speeds);
  const capacity = affinityCapacity(window, ring.length);
  expect(capacity).toBeLessThan(sizes.length / 2); // peers cannot simply keep the data set
  let s: AffinityState = emptyAffinity();
  let fetches = 0;
  for (let step = 0; step < stepsPerEpoch(n, B); step++) {
    const { ids } = stepSamples(2, step, B, n, { kind: 'shard-local', shardSizes: sizes, window });
    const r = assignByAffinity(s, { ids, shardOf, ring, targets, capacity });
    expect(r.slices.map((x) => x.length)).toEqual(targets);
    s = r.state;
    fetches += r.fetches;
  }
  return fetches / sizes.length;
}

describe('downloads over an epoch (window = 4 x peers, capacity 2 x window / peers + 2)', () => {
  // Shards as the data CLI builds them: equal, the last one short.
  const sizes = Array.from({ length: 96 }, (_, k) => (k === 95 ? 37 : 100));

  it('4 equal peers and 4 unequal peers each fetch about one shard in W per block', () => {
    const equal = downloadsOverIdeal(sizes, 64, [1, 1, 1, 1], 16);
    const unequal = downloadsOverIdeal(sizes, 64, [1, 2, 3, 4], 16);
    const ragged = downloadsOverIdeal(sizes, 96, [1, 1.7, 2.3, 5], 16);
    console.info(`shard downloads over ideal, one epoch of 96 shards: 4 equal peers ${equal.toFixed(3)}, ` +
      `speeds 1:2:3:4 ${unequal.toFixed(3)}, speeds 1:1.7:2.3:5 (B 96) ${ragged.toFixed(3)}`);
    expect(equal).toBeLessThanOrEqual(1.2);
    expect(unequal).toBeLessThanOrEqual(1.2);
    expect(ragged).toBeLessThanOrEqual(1.25);
  });

  it('shards of unequal sizes cost more splits, still far from one shard per image', () => {
    const rng = makeRng(5);
    const uneven = Array.from({ length: 96 }, () => 80 + rng.int(41));
    const equal = downloadsOverIdeal(uneven, 64, [1, 1, 1, 1], 16);
    const unequal = downloadsOverIdeal(uneven, 64, [1, 2, 3, 4], 16);
    console.info(`shard downloads over ideal, 96 shards of 80..120: 4 equal peers ${equal.toFixed(3)}, speeds 1:2:3:4 ${unequal.toFixed(3)}`);
    expect(equal).toBeLessThanOrEqual(1.5);
    expect(unequal).toBeLessThanOrEqual(1.5);
  });
});
