import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/batchnorm.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

const rand = (seed: number, n: number, lo = -1, hi = 1): Float64Array => {
  const rng = makeRng(seed);
  return Float64Array.from({ length: n }, () => lo + (hi - lo) * rng.next());
};
const P = { eps: 1e-5, momentum: 0.1 };

describe('batchnorm reference', () => {
  for (const shape of [[2, 3, 2, 3], [1, 5, 3, 1], [4, 6], [3, 2, 1, 1]]) {
    it(`[${shape.join(', ')}] backward matches central differences (x, gamma, beta)`, () => {
      const size = shape.reduce((a, b) => a * b, 1);
      const c = shape[1]!;
      const x = rand(1, size), gamma = rand(2, c, 0.5, 1.5), beta = rand(3, c);
      const zeros = new Float64Array(c), ones = new Float64Array(c).fill(1);
      const fwd = (xx: Float64Array, g: Float64Array, b: Float64Array) => ref.batchNormForward(xx, shape, g, b, zeros, ones, P);
      expect(gradCheck({
        inputs: [x, gamma, beta],
        forward: ([xx, g, b]) => fwd(xx!, g!, b!).y,
        backward: ([xx, g, b], dy) => {
          const f = fwd(xx!, g!, b!);
          const r = ref.batchNormBackward(xx!, dy, shape, g!, f.mean, f.invstd);
          return [r.dx, r.dgamma, r.dbeta];
        },
        tol: { rtol: 1e-5, atol: 1e-6 },
      })).toEqual([]);
    });
  }
  it('inference backward is gamma / sqrt(var + eps) (linear map, checked numerically)', () => {
    const shape = [2, 3, 2, 2];
    const rm = rand(4, 3), rv = rand(5, 3, 0.5, 2), g = rand(6, 3), b = rand(7, 3);
    expect(gradCheck({
      inputs: [rand(8, 24)],
      forward: ([xx]) => ref.batchNormInference(xx!, shape, g, b, rm, rv, 1e-5),
      backward: (_, dy) => [dy.map((v, i) => (v * g[Math.floor(i / 4) % 3]!) / Math.sqrt(rv[Math.floor(i / 4) % 3]! + 1e-5))],
    })).toEqual([]);
  });
  it('normalises to mean 0, variance 1 and updates running stats the PyTorch way', () => {
    // One channel, values 1..4: mean 2.5, biased var 1.25, unbiased var 5/3.
    const x = Float64Array.from([1, 2, 3, 4]);
    const r = ref.batchNormForward(x, [4, 1], Float64Array.of(1), Float64Array.of(0), Float64Array.of(1), Float64Array.of(1), { eps: 0, momentum: 0.1 });
    expect(r.mean[0]).toBeCloseTo(2.5, 12);
    expect(r.invstd[0]).toBeCloseTo(1 / Math.sqrt(1.25), 12);
    expect(r.runningMean[0]).toBeCloseTo(0.9 + 0.25, 12);
    expect(r.runningVar[0]).toBeCloseTo(0.9 + 0.1 * (5 / 3), 12);
  });
  it('N*H*W = 1: y = beta, finite thanks to eps', () => {
    const r = ref.batchNormForward(
      Float64Array.of(3, -2), [1, 2, 1, 1], Float64Array.of(2, 2), Float64Array.of(0.5, -1), new Float64Array(2), new Float64Array(2).fill(1), P,
    );
    expect(Array.from(r.y)).toEqual([0.5, -1]);
    expect(r.invstd.every(Number.isFinite)).toBe(true);
  });
});
