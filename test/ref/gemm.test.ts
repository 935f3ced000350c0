import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/gemm.ts';
import { gradCheck } from '../helpers/gradcheck.ts';
import { makeRng } from '../../src/rng.ts';

describe('gemm reference', () => {
  for (const [transA, transB] of [[false, false], [true, false], [false, true], [true, true]] as const) {
    it(`backward matches central differences (transA=${transA}, transB=${transB})`, () => {
      const rng = makeRng(7);
      const p = { M: 3, N: 4, K: 5, transA, transB };
      const a = Float64Array.from({ length: 15 }, () => rng.normal());
      const b = Float64Array.from({ length: 20 }, () => rng.normal());
      expect(gradCheck({
        inputs: [a, b],
        forward: ([x, y]) => ref.gemm(x!, y!, null, p),
        backward: ([x, y], dc) => ref.gemmBackward(x!, y!, dc, p),
      })).toEqual([]);
    });
  }
});
