// float64 reference: local response normalisation across channels (PyTorch's formula, see
// src/ops/lrn.ts). Backward by the chain rule through every window, scattered.
import { lrnDims, type LrnParams } from '../shapes/lrn.ts';

/** s[i] = k + alpha/size * sum of x^2 over the channel window of element i. */
function scales(x: Float64Array, shape: readonly number[], p: LrnParams): Float64Array {
  const { n, c, hw } = lrnDims(shape, p, 'ref.lrn');
  const s = new Float64Array(x.length);
  for (let b = 0; b < n; b++)
    for (let ch = 0; ch < c; ch++)
      for (let j = 0; j < hw; j++) {
        let sum = 0;
        for (let cc = ch - Math.floor(p.size / 2); cc <= ch + Math.floor((p.size - 1) / 2); cc++) {
          if (cc >= 0 && cc < c) sum += x[(b * c + cc) * hw + j]! ** 2;
        }
        s[(b * c + ch) * hw + j] = p.k + (p.alpha / p.size) * sum;
      }
  return s;
}

export function lrnForward(x: Float64Array, shape: readonly number[], p: LrnParams): Float64Array {
  const s = scales(x, shape, p);
  return x.map((v, i) => v * s[i]! ** -p.beta);
}

export function lrnBackward(x: Float64Array, dy: Float64Array, shape: readonly number[], p: LrnParams): Float64Array {
  const { n, c, hw } = lrnDims(shape, p, 'ref.lrn');
  const s = scales(x, shape, p);
  const dx = x.map((_, i) => dy[i]! * s[i]! ** -p.beta);
  // y_c depends on x_j (j in window(c)) through s_c: dy_c/dx_j += x_c * (-beta) s_c^(-beta-1) * alpha/size * 2 x_j.
  for (let b = 0; b < n; b++)
    for (let ch = 0; ch < c; ch++)
      for (let j = 0; j < hw; j++) {
        const i = (b * c + ch) * hw + j;
        const g = dy[i]! * x[i]! * -p.beta * s[i]! ** (-p.beta - 1) * (p.alpha / p.size) * 2;
        for (let cc = ch - Math.floor(p.size / 2); cc <= ch + Math.floor((p.size - 1) / 2); cc++) {
          if (cc >= 0 && cc < c) dx[(b * c + cc) * hw + j]! += g * x[(b * c + cc) * hw + j]!;
        }
      }
  return dx;
}
