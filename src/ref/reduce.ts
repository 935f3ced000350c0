// float64 reference: sums, sums of squares, and per-segment sums of squares (with backward).
import type { Segment } from '../shapes/reduce.ts';

export function sum(x: Float64Array): number {
  let s = 0;
  for (const v of x) s += v;
  return s;
}

export function sumSquares(x: Float64Array): number {
  let s = 0;
  for (const v of x) s += v * v;
  return s;
}

/** out[s] = sum of x^2 over segment s; NaN for a segment outside x (as the GPU op). */
export function sumSquaresSegments(x: Float64Array, segs: readonly Segment[]): Float64Array {
  return Float64Array.from(segs, ([off, len]) => (off + len <= x.length ? sumSquares(x.subarray(off, off + len)) : NaN));
}

/** dx[j] = 2 x[j] dout[s] for j in segment s (segments disjoint). */
export function sumSquaresSegmentsBackward(x: Float64Array, segs: readonly Segment[], dout: Float64Array): Float64Array {
  const dx = new Float64Array(x.length);
  segs.forEach(([off, len], s) => {
    for (let j = off; j < off + len; j++) dx[j] = 2 * x[j]! * dout[s]!;
  });
  return dx;
}
