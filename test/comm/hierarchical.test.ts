// The two-level all-reduce over memory links: 8, 9, 12, 16 and 17 peers (equal and unequal
// groups), awkward lengths; every peer bit-identical, equal to the fixed-order reference and
// close to the float64 sum; message rounds counted (Lamport depth) against the flat ring.
import { afterEach, describe, expect, it } from 'vitest';
import {
  allReduceSum, allReduceTwoLevel, flatRounds, memoryTwoLevel, planTopology, twoLevelRounds, type MemoryTwoLevelOptions, type PlanOptions, type Topology,
  type WireFormat,
} from '../../src/comm/index.ts';
import type { Ring } from '../../src/comm/ring.ts';
import { RoundCounter, bitwiseEqual, randomGrad, sum64, twoLevelBase, twoLevelReference, worstError, wrappedFlatRing } from './helpers.ts';

const idsOf = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `p${String(i).padStart(2, '0')}`, bandwidth: 1e6 * ((i * 7) % n + 1) }));
const open: { close(): void }[] = [];
afterEach(() => { for (const r of open.splice(0)) r.close(); });

interface Run { topology: Topology; inputs: Map<string, Float32Array>; outs: Map<string, Float32Array> }

/** One all-reduce per entry of `steps` over one set of rings; returns the last one's data. */
async function twoLevel(
  n: number, length: number, plan: PlanOptions, o: { wire?: WireFormat; messageBytes?: number; steps?: number[]; mem?: MemoryTwoLevelOptions } = {},
): Promise<Run> {
  const topology = planTopology(idsOf(n), plan);
  const { peers } = memoryTwoLevel(topology, o.mem);
  open.push(...peers.values());
  let run: Run | null = null;
  for (const step of o.steps ?? [0]) {
    const inputs = new Map([...peers.keys()].map((id, i) => [id, randomGrad(length, 7919 * step + 31 * i + n + length)]));
    const outs = new Map([...inputs].map(([id, g]) => [id, g.slice()]));
    const results = await Promise.all(
      [...peers].map(([id, rings]) => allReduceTwoLevel(outs.get(id)!, { rings, step, wire: o.wire, messageBytes: o.messageBytes })),
    );
    [...outs.values()].forEach((g, i) => expect(results[i]).toBe(g)); // in place
    run = { topology, inputs, outs };
  }
  if (!run) throw new Error('no step ran');
  return run;
}

function expectBitIdentical(outs: Map<string, Float32Array>): Float32Array {
  const [first, ...rest] = [...outs];
  for (const [id, g] of rest) expect(bitwiseEqual(g, first[1]), `${id} differs from ${first[0]}`).toBe(true);
  return first[1];
}

// float32 rounding of a sum of N terms: relative to sum |x_i|, about N * 2^-24 at worst.
const tol = (n: number) => n * 2 ** -24 * 2;

const CASES: { n: number; plan: PlanOptions; sizes: number[] }[] = [
  { n: 8, plan: { groups: 3 }, sizes: [2, 3, 3] },
  { n: 9, plan: { groups: 3 }, sizes: [3, 3, 3] },
  { n: 12, plan: { groups: 3 }, sizes: [4, 4, 4] },
  { n: 16, plan: {}, sizes: [4, 4, 4, 4] },
  { n: 17, plan: {}, sizes: [4, 4, 4, 5] },
];

describe('allReduceTwoLevel over memory links', () => {
  for (const { n, plan, sizes } of CASES) {
    it(`N=${n} (groups ${sizes.join('+')}): bit-identical, the fixed-order sum, lengths 0, 1, < N, not divisible, many messages`, async () => {
      for (const length of [0, 1, n - 1, 7 * n + 3, 4099]) {
        const { topology, inputs, outs } = await twoLevel(n, length, plan, { messageBytes: 32 + 4 * 61 }); // 61 floats a message
        expect(topology.groups.map((g) => g.length)).toEqual(sizes);
        const got = expectBitIdentical(outs);
        const ref = twoLevelReference(topology, inputs, length, 61);
        expect(bitwiseEqual(got, ref), `length ${length}: equals the fixed-order reference bit for bit`).toBe(true);
        const grads = [...inputs.values()];
        const err = worstError(got, sum64(grads), grads);
        expect(err.rel, `length ${length}: worst at ${err.index}`).toBeLessThanOrEqual(tol(n));
        if (length > 0) expect(bitwiseEqual(got, grads[0])).toBe(false); // not vacuous
      }
    });
  }

  it('N=17: three steps on the same rings (group frames carry 2s and 2s+1), default 64 KiB frames', async () => {
    const { topology, inputs, outs } = await twoLevel(17, 100_003, {}, { steps: [0, 1, 5] });
    expect(bitwiseEqual(expectBitIdentical(outs), twoLevelReference(topology, inputs, 100_003))).toBe(true);
  });

  it('one group (N < 16) still sums bit-identically (same path, no columns)', async () => {
    const { topology, inputs, outs } = await twoLevel(5, 1001, {}, { messageBytes: 32 + 4 * 50 });
    expect(topology.groups.length).toBe(1);
    expect(bitwiseEqual(expectBitIdentical(outs), twoLevelReference(topology, inputs, 1001, 50))).toBe(true);
  });

  for (const wire of ['f16', 'bf16'] as const) {
    it(`half-precision wire ${wire}: N=17, every peer the same bits, close to the float64 sum`, async () => {
      const { inputs, outs } = await twoLevel(17, 5003, {}, { wire, messageBytes: 32 + 2 * 200 });
      const got = expectBitIdentical(outs);
      const grads = [...inputs.values()];
      const err = worstError(got, sum64(grads), grads);
      // Every partial sum is rounded to the wire's precision once per hop (about 11 of them).
      expect(err.rel, `worst at ${err.index}`).toBeLessThanOrEqual(16 * (wire === 'f16' ? 2 ** -11 : 2 ** -8));
    });
  }
});

/** Depth of the deepest data frame of one all-reduce in frames of `seg` elements, and the data frames each peer sent. */
async function countFlat(n: number, length: number, seg: number): Promise<{ rounds: number; frames: number[] }> {
  const counter = new RoundCounter(length);
  const ids = idsOf(n).map((p) => p.id);
  const rings: Ring[] = wrappedFlatRing(ids, counter.wrap);
  open.push(...rings);
  const outs = ids.map((_, i) => randomGrad(length, i));
  await Promise.all(rings.map((ring, i) => allReduceSum(outs[i], { ring, step: 0, messageBytes: 32 + 4 * seg })));
  return { rounds: counter.max, frames: ids.map((id) => counter.framesSent.get(id) ?? 0) };
}

async function countTwoLevel(
  n: number, length: number, seg: number, plan: PlanOptions = {},
): Promise<{ rounds: number; topology: Topology; frames: number[] }> {
  const topology0 = planTopology(idsOf(n), plan);
  const counter = new RoundCounter(length, twoLevelBase(topology0, length, seg));
  const { topology, outs, inputs } = await twoLevel(n, length, plan, { mem: { wrap: counter.wrap }, messageBytes: 32 + 4 * seg });
  expect(bitwiseEqual(expectBitIdentical(outs), twoLevelReference(topology, inputs, length, seg))).toBe(true);
  return { rounds: counter.max, topology, frames: topology.groups.flat().map((id) => counter.framesSent.get(id) ?? 0) };
}

describe('message rounds (latency terms), counted', () => {
  // Frames of length/(K G) elements: every chunk is one message and none is merged for being
  // small (the ring cuts a buffer of fewer than N frames into fewer chunks).
  it('16 peers: flat ring 30 rounds, two-level 12 = 2(4-1) + 2(4-1)', async () => {
    expect((await countFlat(16, 4096, 256)).rounds).toBe(flatRounds(16));
    const { rounds, topology } = await countTwoLevel(16, 4096, 256);
    expect(twoLevelRounds(topology)).toBe(12);
    expect(rounds).toBe(12);
  });

  it('17 peers (groups 4+4+4+5): flat 32 rounds, two-level 13 (bound 2(5-1) + 2(4-1) = 14)', async () => {
    expect((await countFlat(17, 4096, 241)).rounds).toBe(32);
    const { rounds, topology } = await countTwoLevel(17, 4096, 256);
    // The larger group's extra hop is off the critical path for most chunks: 13, not the bound.
    expect(twoLevelRounds(topology)).toBe(14);
    expect(rounds).toBe(13);
  });

  it('8 peers in groups 2+3+3: 8 rounds (bound 10), flat 14', async () => {
    expect((await countFlat(8, 960, 120)).rounds).toBe(14);
    const { rounds, topology } = await countTwoLevel(8, 960, 160, { groups: 3 });
    expect(rounds).toBeLessThanOrEqual(twoLevelRounds(topology));
    expect(rounds).toBeGreaterThanOrEqual(2 * (2 - 1) + 2 * (3 - 1));
    expect(rounds).toBe(8);
  });

  it('36 peers: flat 70 rounds, two-level 20 = 2(6-1) + 2(6-1)', async () => {
    const { rounds } = await countTwoLevel(36, 36 * 64, 64);
    expect(rounds).toBe(20);
    expect(flatRounds(36)).toBe(70);
  });
});

describe('a gradient of fewer frames than peers: fewer chunks, fewer frames, no more rounds', () => {
  // The tiny CNN's 1.5 KB gradient in 64 KiB frames, as in the churn bench: before, every peer
  // sent 2(N-1) frames of a few bytes (and 2(n-1) + 2(G-1) on two levels).
  it('flat ring of 12, one frame of data: each peer sends 2 data frames at most (was 22), in the same 22 rounds', async () => {
    const { rounds, frames } = await countFlat(12, 380, 16_376);
    expect(rounds).toBe(flatRounds(12));
    expect(Math.max(...frames)).toBe(2);
    expect(frames.reduce((a, b) => a + b, 0)).toBe(2 * (12 - 1));
  });

  it('flat ring of 10, 3 frames of data: 3 chunks of one frame, 2(N-1) hops each', async () => {
    const { rounds, frames } = await countFlat(10, 3 * 100 - 7, 100);
    expect(rounds).toBe(flatRounds(10));
    expect(frames.reduce((a, b) => a + b, 0)).toBe(3 * 2 * (10 - 1));
  });

  it('two levels, 50 peers (7 groups), one frame of data: at most 2 frames a peer in its group ring, 2 more in its column for the owner of shard 0 ' +
    '(which forms the group sum and sends 1 in the group); no more rounds than the bound', async () => {
    const { rounds, topology, frames } = await countTwoLevel(50, 380, 16_376);
    expect(topology.groups.length).toBe(7);
    expect(rounds).toBeLessThanOrEqual(twoLevelRounds(topology));
    expect(Math.max(...frames)).toBe(3);
    // Each group ring: n-1 hops each way; the column of shard 0: 2(G-1) hops.
    const hops = topology.groups.reduce((a, g) => a + 2 * (g.length - 1), 0) + 2 * (topology.groups.length - 1);
    expect(frames.reduce((a, b) => a + b, 0)).toBe(hops);
  });

  it('two levels, 17 peers, lengths of 1 to 6 frames: bit-identical, the fixed-order sum', async () => {
    for (const length of [1, 61, 62, 2 * 61 + 1, 5 * 61, 6 * 61 - 1]) {
      const { topology, inputs, outs } = await twoLevel(17, length, {}, { messageBytes: 32 + 4 * 61 });
      expect(bitwiseEqual(expectBitIdentical(outs), twoLevelReference(topology, inputs, length, 61)), `length ${length}`).toBe(true);
    }
  });
});
