// The bucketed all-reduce (src/comm/buckets.ts) over in-memory rings: every peer ends with the
// same bits, equal to the documented fixed order (computed here from the description) and close
// to the float64 sum; buckets that become ready at different times on different peers (later
// buckets' frames arriving early) are not confused; host work runs per bucket, in order.
import { describe, expect, it } from 'vitest';
import { allReduceSum } from '../../src/comm/allreduce.ts';
import { allReduceBuckets, bucketStep, checkBuckets, MAX_BUCKETS, type BucketRange } from '../../src/comm/buckets.ts';
import { RingError } from '../../src/comm/errors.ts';
import { memoryRing } from '../../src/comm/memory-ring.ts';
import { bitwiseEqual, randomGrad, ringCut, sum64, worstError } from './helpers.ts';

const TOL = 8 * 2 ** -24 * 2;
/** Elements a frame. */
const SEG = 257;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Irregular cuts of [0, length), tail first (as bucketPlan orders them). */
function cuts(length: number, sizes: readonly number[]): BucketRange[] {
  const out: BucketRange[] = [];
  let end = length;
  for (let k = 0; end > 0; k++) {
    const start = Math.max(0, end - sizes[k % sizes.length]!);
    out.push({ start, end });
    end = start;
  }
  return out;
}

/**
 * The documented order: per bucket, chunk c (the ring's cut of the bucket: n chunks, or one a
 * frame when the bucket has fewer than n frames) is x[c] + x[c+1] + ... + x[c-1], left to right
 * in float32.
 */
function reference(inputs: readonly Float32Array[], buckets: readonly BucketRange[], segElems: number): Float32Array {
  const n = inputs.length;
  const out = new Float32Array(inputs[0]!.length);
  for (const b of buckets) {
    for (let c = 0; c < n; c++) {
      const [a, z] = ringCut(c, b.end - b.start, n, segElems);
      for (let i = b.start + a; i < b.start + z; i++) {
        let acc = inputs[c]![i]!;
        for (let r = 1; r < n; r++) acc = Math.fround(acc + inputs[(c + r) % n]![i]!);
        out[i] = acc;
      }
    }
  }
  return out;
}

async function run(n: number, length: number, buckets: readonly BucketRange[], steps = 1): Promise<void> {
  const ids = Array.from({ length: n }, (_, i) => `p${i}`);
  const { rings } = memoryRing(ids);
  try {
    for (let step = 0; step < steps; step++) {
      const inputs = ids.map((_, i) => randomGrad(length, 31 * i + 7 * step + n));
      const outs = inputs.map((g) => g.slice());
      const reduced: number[][] = ids.map(() => []);
      await Promise.all(rings.map((ring, p) => {
        // Each peer's buckets become ready at its own pace (peer p is slower by p ms a bucket),
        // so a faster neighbour's frames of later buckets arrive before this peer starts them.
        const ready = (k: number) => sleep((k * (p + 1)) % 5);
        return allReduceBuckets(outs[p]!, buckets, ready, {
          ring, step, messageBytes: 32 + 4 * SEG,
          onReduced: (k) => {
            expect(reduced[p]!.length).toBe(k);
            reduced[p]!.push(k);
          },
        });
      }));
      const want = reference(inputs, buckets, SEG);
      for (let p = 0; p < n; p++) {
        expect(bitwiseEqual(outs[p]!, want), `peer ${p} differs from the documented order`).toBe(true);
        expect(reduced[p]).toEqual(buckets.map((_, k) => k));
      }
      const err = worstError(outs[0]!, sum64(inputs), inputs);
      expect(err.rel, `worst at ${err.index}`).toBeLessThanOrEqual(TOL);
      if (n > 1) expect(bitwiseEqual(outs[0]!, inputs[0]!)).toBe(false);
    }
  } finally {
    for (const r of rings) r.close();
  }
}

describe('allReduceBuckets over memory rings', () => {
  for (const n of [1, 2, 3, 4]) {
    it(`N=${n}: irregular buckets ready at different times, two steps on one ring`, async () => {
      await run(n, 20_011, cuts(20_011, [1000, 64, 5003, 1, 7000]), 2);
    });
  }

  it('one bucket over everything is bitwise the single allReduceSum', async () => {
    const n = 3;
    const length = 10_007;
    const inputs = Array.from({ length: n }, (_, i) => randomGrad(length, i + 40));
    const a = inputs.map((g) => g.slice());
    const b = inputs.map((g) => g.slice());
    const r1 = memoryRing(['a', 'b', 'c']);
    const r2 = memoryRing(['a', 'b', 'c']);
    await Promise.all(r1.rings.map((ring, i) => allReduceSum(a[i]!, { ring, step: 3 })));
    await Promise.all(r2.rings.map((ring, i) => allReduceBuckets(b[i]!, [{ start: 0, end: length }], async () => undefined, { ring, step: 3 })));
    for (let i = 0; i < n; i++) expect(bitwiseEqual(a[i]!, b[i]!)).toBe(true);
    for (const r of [...r1.rings, ...r2.rings]) r.close();
  });

  it('runs a given collective per bucket with ring steps step * MAX_BUCKETS + k, in order', async () => {
    const { rings } = memoryRing(['a', 'b']);
    const seen: number[][] = [[], []];
    const buckets = cuts(3000, [1000]);
    const outs = [randomGrad(3000, 1), randomGrad(3000, 2)];
    await Promise.all(rings.map((ring, p) => allReduceBuckets(outs[p]!, buckets, async () => undefined, {
      step: 9,
      collective: (part, s) => {
        seen[p]!.push(s);
        return allReduceSum(part, { ring, step: s });
      },
    })));
    expect(seen[0]).toEqual([0, 1, 2].map((k) => bucketStep(9, k)));
    expect(seen[1]).toEqual(seen[0]);
    expect(bucketStep(9, 2)).toBe(9 * MAX_BUCKETS + 2);
    for (const r of rings) r.close();
  });

  it('refuses buckets that do not tile the gradient, and a step too large for the numbering', async () => {
    expect(checkBuckets([{ start: 0, end: 5 }, { start: 6, end: 10 }], 10)).toMatch(/\[5, 6\) are in no bucket/);
    expect(checkBuckets([{ start: 0, end: 6 }, { start: 5, end: 10 }], 10)).toMatch(/overlap/);
    expect(checkBuckets([{ start: 0, end: 5 }], 10)).toMatch(/end at 5/);
    expect(checkBuckets([{ start: 5, end: 10 }, { start: 0, end: 5 }], 10)).toBe('');
    const { rings } = memoryRing(['a']);
    const g = new Float32Array(10);
    await expect(allReduceBuckets(g, [{ start: 0, end: 5 }], async () => undefined, { ring: rings[0]!, step: 0 })).rejects.toThrow(RingError);
    await expect(allReduceBuckets(g, [{ start: 0, end: 10 }], async () => undefined, { ring: rings[0]!, step: 2 ** 24 })).rejects.toThrow(/step/);
    rings[0]!.close();
  });

  it('peers with different bucket plans fail with a PLAN mismatch, not a wrong sum', async () => {
    const { rings } = memoryRing(['a', 'b']);
    const plans = [cuts(4000, [1000]), cuts(4000, [1500])];
    const results = await Promise.allSettled(
      rings.map((ring, p) => allReduceBuckets(randomGrad(4000, p), plans[p]!, async () => undefined, { ring, step: 1 })),
    );
    for (const r of results) {
      expect(r.status).toBe('rejected');
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(RingError);
    }
    const reasons = results.map((r) => (r.status === 'rejected' ? String(r.reason) : ''));
    expect(reasons.some((m) => /gradient length 1000 there, 1500 here|gradient length 1500 there, 1000 here/.test(m))).toBe(true);
    for (const r of rings) r.close();
  });

  it('a compute failure (ready rejects) rejects the all-reduce with that error', async () => {
    const { rings } = memoryRing(['a']);
    const boom = new Error('backward failed');
    await expect(allReduceBuckets(
      new Float32Array(8), [{ start: 4, end: 8 }, { start: 0, end: 4 }], async (k) => { if (k === 1) throw boom; }, { ring: rings[0]!, step: 0 },
    )).rejects.toBe(boom);
    rings[0]!.close();
  });
});
