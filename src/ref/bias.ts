// float64 reference: bias add per channel of NCHW (or per feature of [N, F]).
import { biasDims } from '../shapes/bias.ts';

export function biasForward(x: Float64Array, b: Float64Array, shape: readonly number[]): Float64Array {
  const { c, hw } = biasDims(shape);
  return x.map((v, i) => v + b[Math.floor(i / hw) % c]!);
}

/** Returns [dx, db]; dx = dy. */
export function biasBackward(dy: Float64Array, shape: readonly number[]): [Float64Array, Float64Array] {
  const { n, c, hw } = biasDims(shape);
  const db = new Float64Array(c);
  for (let i = 0; i < n; i++) {
    for (let ch = 0; ch < c; ch++) {
      for (let j = 0; j < hw; j++) db[ch] += dy[(i * c + ch) * hw + j]!;
    }
  }
  return [Float64Array.from(dy), db];
}
