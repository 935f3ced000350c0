import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/softmax_xent.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

describe('softmax cross-entropy reference', () => {
  for (const [n, k] of [[3, 5], [1, 1], [2, 10]] as const) {
    it(`[${n}, ${k}] backward matches central differences`, () => {
      const rng = makeRng(n * 100 + k);
      const logits = Float64Array.from({ length: n * k }, () => 4 * rng.next() - 2);
      const labels = Int32Array.from({ length: n }, (_, i) => (i * 7) % k);
      expect(gradCheck({
        inputs: [logits],
        forward: ([l]) => ref.softmaxXentForward(l!, labels, [n, k]),
        backward: ([l], d) => [ref.softmaxXentBackward(l!, labels, [n, k], d)],
      })).toEqual([]);
    });
  }
  for (const eps of [0.1, 0.5]) {
    it(`label smoothing ${eps}: backward matches central differences`, () => {
      const [n, k] = [4, 7];
      const rng = makeRng(77);
      const logits = Float64Array.from({ length: n * k }, () => 4 * rng.next() - 2);
      const labels = Int32Array.from({ length: n }, (_, i) => (i * 3) % k);
      expect(gradCheck({
        inputs: [logits],
        forward: ([l]) => ref.softmaxXentForward(l!, labels, [n, k], eps),
        backward: ([l], d) => [ref.softmaxXentBackward(l!, labels, [n, k], d, eps)],
      })).toEqual([]);
    });
  }
  it('label smoothing is the cross-entropy against the smoothed target', () => {
    // Direct: -sum_j t_j log p_j with t = (1 - eps) onehot + eps / K.
    const l = Float64Array.from([0.3, -1.2, 2.0, 0.1]);
    const eps = 0.2;
    const z = l.reduce((a, v) => a + Math.exp(v), 0);
    const want = -[...l].reduce((a, v, j) => a + ((j === 2 ? 1 - eps : 0) + eps / 4) * (v - Math.log(z)), 0);
    expect(ref.softmaxXentForward(l, Int32Array.from([2]), [1, 4], eps)[0]).toBeCloseTo(want, 13);
    // Every row of the smoothed gradient sums to zero, as the plain one does.
    const g = ref.softmaxXentBackward(l, Int32Array.from([2]), [1, 4], 1, eps);
    expect(g.reduce((a, v) => a + v, 0)).toBeCloseTo(0, 14);
  });
  it('is stable for logits of 1e4 and exact for a known case', () => {
    const l = Float64Array.from([1e4, 0, -1e4]);
    expect(ref.softmaxXentForward(l, Int32Array.from([0]), [1, 3])[0]).toBeCloseTo(Math.log(1 + Math.exp(-1e4) + Math.exp(-2e4)), 12);
    expect(ref.softmaxXentForward(l, Int32Array.from([1]), [1, 3])[0]).toBeCloseTo(1e4, 8);
    expect(ref.softmaxXentForward(Float64Array.from([0, 0]), Int32Array.from([1]), [1, 2])[0]).toBeCloseTo(Math.LN2, 14);
  });
  it('flags an out-of-range label with a NaN loss and a zero gradient', () => {
    const l = Float64Array.from([0.5, -0.5]);
    expect(ref.softmaxXentForward(l, Int32Array.from([2]), [1, 2])[0]).toBeNaN();
    expect(Array.from(ref.softmaxXentBackward(l, Int32Array.from([-1]), [1, 2], 1))).toEqual([0, 0]);
  });
});
