// Proof of overlap, with a compute of known duration that does not hold the JS thread (as a
// GPU's does, or a peer's on its own machine): N peers over a ring of links with a bandwidth
// and a latency (test/comm/shaped-link.ts). Each peer's "backward" makes its buckets final one
// after another, tail first, at known times; the bucketed all-reduce (src/comm/buckets.ts) sums
// each as soon as it is final. Measured in the same test:
//   compute C (forward + backward, known), comm R (allReduceSum alone, links sized so R ~ C),
//   sequential (compute, then allReduceSum: today's volunteer), overlapped (the new path).
// Asserted: the overlapped step takes under MAX_RATIO x (C + R), and every peer ends with the
// same bits, close to the float64 sum.
import { describe, expect, it } from 'vitest';
import { allReduceSum } from '../../src/comm/allreduce.ts';
import { allReduceBuckets, type BucketRange } from '../../src/comm/buckets.ts';
import { overlapTimings, type OverlapTimings } from '../../src/train/overlap.ts';
import { bitwiseEqual, randomGrad, sum64, worstError } from '../comm/helpers.ts';
import { shapedRing } from '../comm/shaped-link.ts';

const N = 3;
const LENGTH = 600_000; // 2.4 MB of float32
const BUCKETS = 6;
const FORWARD_MS = 100;
const BACKWARD_MS = 300;
const LATENCY_MS = 2;
const MAX_RATIO = 0.85;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const ids = Array.from({ length: N }, (_, i) => `p${i}`);
/** Equal buckets, tail first. */
const buckets: BucketRange[] = Array.from({ length: BUCKETS }, (_, k) => ({
  start: Math.floor(((BUCKETS - 1 - k) * LENGTH) / BUCKETS),
  end: Math.floor(((BUCKETS - k) * LENGTH) / BUCKETS),
}));

/** A peer's compute: forward, then the backward stages, bucket k final after stage k; the gradient lands in `out` bucket by bucket. */
function compute(input: Float32Array, out: Float32Array): { ready: (k: number) => Promise<void>; done: Promise<number> } {
  const stages: Promise<void>[] = [];
  let chain = sleep(FORWARD_MS);
  for (const b of buckets) {
    chain = chain.then(() => sleep(BACKWARD_MS / BUCKETS)).then(() => out.set(input.subarray(b.start, b.end), b.start));
    stages.push(chain);
  }
  return { ready: (k) => stages[k]!, done: chain.then(() => performance.now()) };
}

describe(`overlap schedule (${N} peers, ${BUCKETS} buckets, compute off the JS thread, shaped links)`, () => {
  it(`the overlapped step takes under ${MAX_RATIO} x (compute + comm); all peers bitwise equal`, { timeout: 60_000 }, async () => {
    const inputs = ids.map((_, i) => randomGrad(LENGTH, 7 + i));
    const computeMs = FORWARD_MS + BACKWARD_MS;
    const perLink = (2 * (N - 1) / N) * LENGTH * 4;
    const shape = { bytesPerMs: perLink / computeMs, latencyMs: LATENCY_MS };
    const settings = { stallTimeoutMs: 60_000, deadAfterMs: 60_000 };
    const seqRing = shapedRing(ids, shape, settings, 1);
    const ovlRing = shapedRing(ids, shape, settings, 2);
    let seqStep = 0;
    let ovlStep = 0;

    const commAlone = async (): Promise<number> => {
      const bufs = inputs.map((g) => g.slice());
      const step = seqStep++;
      const t = performance.now();
      await Promise.all(seqRing.rings.map((ring, i) => allReduceSum(bufs[i]!, { ring, step })));
      return performance.now() - t;
    };
    const sequential = async (): Promise<number> => {
      const step = seqStep++;
      const t = performance.now();
      await Promise.all(seqRing.rings.map(async (ring, i) => {
        const g = new Float32Array(LENGTH);
        await compute(inputs[i]!, g).done;
        await allReduceSum(g, { ring, step });
      }));
      return performance.now() - t;
    };
    const overlapped = async (): Promise<{ ms: number; outs: Float32Array[]; timings: OverlapTimings[] }> => {
      const step = ovlStep++;
      const t0 = performance.now();
      const res = await Promise.all(ovlRing.rings.map(async (ring, i) => {
        const g = new Float32Array(LENGTH);
        const c = compute(inputs[i]!, g);
        await allReduceBuckets(g, buckets, c.ready, { ring, step });
        const commEnd = performance.now();
        return { g, timings: overlapTimings(t0, { lossSum: 0, computeMs, endAt: await c.done }, commEnd) };
      }));
      return { ms: performance.now() - t0, outs: res.map((r) => r.g), timings: res.map((r) => r.timings) };
    };

    let comm = Infinity, seq = Infinity, ovl = Infinity;
    let best: Awaited<ReturnType<typeof overlapped>> | null = null;
    try {
      for (let r = 0; r < 3; r++) {
        comm = Math.min(comm, await commAlone());
        seq = Math.min(seq, await sequential());
        const o = await overlapped();
        if (o.ms < ovl) { ovl = o.ms; best = o; }
        // Every run, not just the fastest: the same bits everywhere, close to the float64 sum.
        for (let i = 1; i < N; i++) expect(bitwiseEqual(o.outs[i]!, o.outs[0]!), `run ${r}: peer ${i} differs`).toBe(true);
        const err = worstError(o.outs[0]!, sum64(inputs), inputs);
        expect(err.rel, `worst at ${err.index}`).toBeLessThanOrEqual(8 * 2 ** -24 * N);
      }
    } finally {
      for (const r of [...seqRing.rings, ...ovlRing.rings]) r.close();
    }
    const ratio = ovl / (computeMs + comm);
    const t = best!.timings;
    console.log(
      `overlap schedule: ${N} peers, ${(LENGTH * 4) / 1e6} MB gradient in ${BUCKETS} buckets, ` +
        `links ${(shape.bytesPerMs / 1e3).toFixed(1)} MB/s + ${LATENCY_MS} ms\n` +
        `  compute ${computeMs} ms (forward ${FORWARD_MS} + backward ${BACKWARD_MS}), comm alone ${comm.toFixed(0)} ms, ` +
        `sum ${(computeMs + comm).toFixed(0)} ms\n` +
        `  sequential step ${seq.toFixed(0)} ms, overlapped step ${ovl.toFixed(0)} ms: ratio to the sum ${ratio.toFixed(2)}, ` +
        `to sequential ${(ovl / seq).toFixed(2)}\n` +
        t.map((x, i) => `  peer ${i}: compute ${x.computeMs.toFixed(0)} ms, exposed comm ${x.exposedCommMs.toFixed(0)} ms, ` +
          `overhead ${x.overheadMs.toFixed(0)} ms`).join('\n'),
    );
    // Not vacuous: communication is as large as the compute, and the sequential step pays both.
    expect(comm).toBeGreaterThan(0.7 * computeMs);
    expect(seq).toBeGreaterThan(0.9 * (computeMs + comm));
    expect(ratio).toBeLessThan(MAX_RATIO);
    // What stays exposed is about the last bucket's share, not the whole all-reduce.
    for (const x of t) expect(x.exposedCommMs).toBeLessThan(0.6 * comm);
  });
});
