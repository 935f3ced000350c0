import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/reduce.ts';
import type { Segment } from '../../src/shapes/reduce.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

describe('reduce reference', () => {
  const rng = makeRng(3);
  const x = Float64Array.from({ length: 20 }, () => 2 * rng.next() - 1);
  const segs: Segment[] = [[0, 1], [1, 0], [1, 7], [8, 12]];
  it('segmented sum of squares: backward matches central differences', () => {
    expect(gradCheck({
      inputs: [x],
      forward: ([v]) => ref.sumSquaresSegments(v!, segs),
      backward: ([v], d) => [ref.sumSquaresSegmentsBackward(v!, segs, d)],
    })).toEqual([]);
  });
  it('segments add up to the whole sum of squares; empty is 0, outside is NaN', () => {
    const s = ref.sumSquaresSegments(x, segs);
    expect(s[1]).toBe(0);
    expect(ref.sum(s)).toBeCloseTo(ref.sumSquares(x), 12);
    expect(ref.sumSquaresSegments(x, [[15, 6]])[0]).toBeNaN();
    expect(ref.sum(Float64Array.from([1, 2, 3.5]))).toBe(6.5);
  });
});
