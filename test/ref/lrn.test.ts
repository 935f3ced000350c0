import { describe, expect, it } from 'vitest';
import { ALEXNET_LRN, type LrnParams } from '../../src/shapes/lrn.ts';
import * as ref from '../../src/ref/lrn.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

const rand = (seed: number, n: number, scale: number): Float64Array => {
  const rng = makeRng(seed);
  return Float64Array.from({ length: n }, () => scale * (2 * rng.next() - 1));
};
// Strong normalisation (alpha 1, k 1) so the cross-channel terms of the gradient matter.
const STRONG: LrnParams = { size: 5, alpha: 1, beta: 0.75, k: 1 };

describe('lrn reference', () => {
  const cases: [string, number[], LrnParams][] = [
    ['C=7, size 5, strong', [2, 7, 2, 2], STRONG],
    ['C=3 < size 5', [1, 3, 2, 3], STRONG],
    ['C=1', [2, 1, 3, 1], STRONG],
    ['even size 4 (asymmetric window)', [1, 6, 1, 2], { size: 4, alpha: 0.5, beta: 0.6, k: 1.5 }],
    ['AlexNet setting, activations ~ 50', [1, 8, 2, 2], ALEXNET_LRN],
  ];
  for (const [name, shape, p] of cases) {
    it(`${name}: backward matches central differences`, () => {
      const x = rand(shape.length + shape[1]!, shape.reduce((a, b) => a * b, 1), p === ALEXNET_LRN ? 50 : 1);
      expect(gradCheck({
        inputs: [x],
        forward: ([a]) => ref.lrnForward(a!, shape, p),
        backward: ([a], dy) => [ref.lrnBackward(a!, dy, shape, p)],
        tol: { rtol: 1e-5, atol: 1e-6 },
      })).toEqual([]);
    });
  }
  it('matches the formula by hand at a channel edge', () => {
    // C = 2, size 3: channel 0 sees channels 0..1 (c-1 is outside).
    const y = ref.lrnForward(Float64Array.of(1, 2), [1, 2], { size: 3, alpha: 3, beta: 1, k: 1 });
    expect(y[0]).toBeCloseTo(1 / (1 + (3 / 3) * (1 + 4)), 12);
  });
});
