// float64 reference of the optimiser updates (shaders/lars.wgsl writes the same expressions
// in the same order). In place on w and v; G is the gradient SUM, g = G * gradScale.
import type { ParamSegment } from '../optim/types.ts';

export interface RefStep {
  lr: number;
  momentum: number;
  weightDecay: number;
  gradScale: number;
}

function norm(x: Float64Array, off: number, len: number, scale: number): number {
  let s = 0;
  for (let i = off; i < off + len; i++) s += (x[i]! * scale) ** 2;
  return Math.sqrt(s);
}

/** lambda = eta ||w|| / (||g|| + beta ||w||), or 1 when not adapted or a norm is 0. */
export function trustRatio(wn: number, gn: number, eta: number, beta: number, adapt: boolean): number {
  return adapt && wn > 0 && gn > 0 ? (eta * wn) / (gn + beta * wn) : 1;
}

/**
 * v <- m v + (lr lambda)(g + beta w); w <- w - v, per segment (beta = 0 where decay is off); a
 * segment with trustFrom takes that segment's lambda (all lambdas from the norms before the step).
 */
export function larsStep(w: Float64Array, v: Float64Array, G: Float64Array, segs: readonly ParamSegment[], k: RefStep, eta: number): void {
  const lambdas = segs.map((s) => trustRatio(
    norm(w, s.offset, s.length, 1), norm(G, s.offset, s.length, k.gradScale), eta, s.decay ? k.weightDecay : 0, s.adapt,
  ));
  for (const [i, s] of segs.entries()) {
    const beta = s.decay ? k.weightDecay : 0;
    const lambda = !s.adapt && s.trustFrom !== undefined ? lambdas[s.trustFrom]! : lambdas[i]!;
    const rate = k.lr * lambda;
    for (let i = s.offset; i < s.offset + s.length; i++) {
      v[i] = k.momentum * v[i]! + rate * (G[i]! * k.gradScale + beta * w[i]!);
      w[i] = w[i]! - v[i]!;
    }
  }
}

/** d = g + wd w; v <- m v + lr d; w <- w - v (Nesterov: w <- w - (m v + lr d)). */
export function sgdStep(w: Float64Array, v: Float64Array, G: Float64Array, segs: readonly ParamSegment[], k: RefStep, nesterov: boolean): void {
  for (const s of segs) {
    const beta = s.decay ? k.weightDecay : 0;
    for (let i = s.offset; i < s.offset + s.length; i++) {
      const d = G[i]! * k.gradScale + beta * w[i]!;
      v[i] = k.momentum * v[i]! + k.lr * d;
      w[i] = nesterov ? w[i]! - (k.momentum * v[i]! + k.lr * d) : w[i]! - v[i]!;
    }
  }
}
