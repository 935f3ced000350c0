// The ring all-reduce over in-memory links: sums against a float64 oracle, bitwise agreement,
// awkward lengths (not divisible by N, shorter than N), several steps on one ring.
import { describe, expect, it } from 'vitest';
import { allReduceSum, memoryRing } from '../../src/comm/index.ts';
import { bitwiseEqual, randomGrad, sum64, worstError } from './helpers.ts';

// float32 rounding of a sum of N terms: relative to sum |x_i|, at most ~N * 2^-24.
const TOL = 8 * 2 ** -24 * 2;

async function reduceAll(n: number, length: number, opts: { messageBytes?: number; steps?: number } = {}) {
  const ids = Array.from({ length: n }, (_, i) => `p${i}`);
  const { rings } = memoryRing(ids);
  try {
    for (let step = 0; step < (opts.steps ?? 1); step++) {
      const inputs = ids.map((_, i) => randomGrad(length, 1000 * step + 17 * i + n + length));
      const outs = inputs.map((g) => g.slice());
      const results = await Promise.all(rings.map((ring, i) => allReduceSum(outs[i], { ring, step, messageBytes: opts.messageBytes })));
      results.forEach((r, i) => expect(r).toBe(outs[i])); // in place
      const want = sum64(inputs);
      const err = worstError(outs[0], want, inputs);
      expect(err.rel, `worst at index ${err.index}`).toBeLessThanOrEqual(TOL);
      for (let i = 1; i < n; i++) expect(bitwiseEqual(outs[i], outs[0]), `peer ${i} differs from peer 0`).toBe(true);
      // Not vacuous: with n > 1 the result differs from every input.
      if (n > 1 && length > 0) expect(bitwiseEqual(outs[0], inputs[0])).toBe(false);
    }
  } finally {
    for (const r of rings) r.close();
  }
}

describe('allReduceSum over memory links', () => {
  for (let n = 1; n <= 8; n++) {
    it(`N=${n}: lengths 0, < N, not divisible by N, several messages per chunk`, async () => {
      for (const length of [0, 1, Math.max(1, n - 1), n, 7 * n + 3, 10_007]) {
        await reduceAll(n, length, { messageBytes: 32 + 4 * 97 }); // 97 floats a message: many segments
      }
    });
  }

  it('N=4, 1M floats, default 64 KiB messages, three steps on one ring', async () => {
    await reduceAll(4, 1 << 20, { steps: 3 });
  });

  it('N=3 with one peer starting late: early frames are held, not refused', async () => {
    const ids = ['a', 'b', 'c'];
    const { rings } = memoryRing(ids);
    const inputs = ids.map((_, i) => randomGrad(50_000, i + 1));
    const outs = inputs.map((g) => g.slice());
    const first = rings.slice(0, 2).map((ring, i) => allReduceSum(outs[i], { ring, step: 5, messageBytes: 4096 }));
    await new Promise((r) => setTimeout(r, 50));
    const last = allReduceSum(outs[2], { ring: rings[2], step: 5, messageBytes: 4096 });
    await Promise.all([...first, last]);
    expect(worstError(outs[2], sum64(inputs), inputs).rel).toBeLessThanOrEqual(TOL);
    expect(bitwiseEqual(outs[0], outs[2]) && bitwiseEqual(outs[1], outs[2])).toBe(true);
    for (const r of rings) r.close();
  });
});
