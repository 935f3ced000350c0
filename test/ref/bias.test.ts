import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/bias.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

const rand = (seed: number, n: number): Float64Array => {
  const rng = makeRng(seed);
  return Float64Array.from({ length: n }, () => 2 * rng.next() - 1);
};

describe('bias reference', () => {
  for (const shape of [[2, 3, 2, 3], [1, 5, 1, 1], [3, 4]]) {
    it(`[${shape.join(', ')}] backward matches central differences`, () => {
      const n = shape.reduce((a, b) => a * b, 1);
      const x = rand(1, n), b = rand(2, shape[1]!);
      expect(gradCheck({
        inputs: [x, b],
        forward: ([xx, bb]) => ref.biasForward(xx!, bb!, shape),
        backward: (_, dy) => ref.biasBackward(dy, shape),
      })).toEqual([]);
    });
  }
  it('adds b[c] to channel c', () => {
    expect(Array.from(ref.biasForward(new Float64Array(8), Float64Array.from([1, 2]), [2, 2, 1, 2]))).toEqual([1, 1, 2, 2, 1, 1, 2, 2]);
  });
});
