// The gradient noise scale (McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of
// Large-Batch Training"): B_simple = tr(Sigma) / |G|^2, with G the true gradient and Sigma the
// per-sample gradient covariance. Below about B_simple a batch twice as large needs about half
// the steps (it costs nothing in epochs); well above it, steps barely fall as the batch grows,
// so at a fixed number of epochs a larger batch has too few updates. It grows as training
// goes on (the gradient shrinks faster than its noise).
//
// Estimated from the norms of mean gradients at two batch sizes b < B (their appendix A): with
// g_b the mean gradient of b samples, E|g_b|^2 = |G|^2 + tr(Sigma) / b, so
//   |G|^2     ~ (B |g_B|^2 - b E|g_b|^2) / (B - b)
//   tr(Sigma) ~ (E|g_b|^2 - |g_B|^2) / (1/b - 1/B)
// both unbiased. Here the k small batches of b samples are disjoint and g_B is their mean (B = k b),
// so the large batch costs no extra compute.
import type { Engine, TensorLike } from '../src/backend/engine.ts';
import type { Model } from '../src/nn/model.ts';
import { recordGradients, uploadBatch, type HostBatch } from '../src/train/step.ts';

/** Where the batches come from (a BatchLoader is one). */
export interface BatchSource { load(ids: readonly number[], epoch: number): Promise<HostBatch> }

export interface NoiseScale {
  /** b: the small batches' size, B = k b the large one's. */
  small: number;
  large: number;
  /** Estimates of |G|^2 and tr(Sigma) (per-sample covariance), and B_simple = tr(Sigma) / |G|^2. */
  gradSq: number;
  traceSigma: number;
  /** null when the |G|^2 estimate is not positive (the noise swamps the signal at these sizes). */
  bSimple: number | null;
}

/**
 * B_simple from E|g_b|^2 (`smallSq`, the mean over the small batches) and |g_B|^2 (`largeSq`).
 * Pure; b >= 1 and B > b.
 */
export function noiseScaleOf(smallSq: number, largeSq: number, small: number, large: number): NoiseScale {
  if (!(Number.isInteger(small) && small >= 1 && Number.isInteger(large) && large > small)) {
    throw new RangeError(`noiseScaleOf: need integers 1 <= b < B, got b = ${small}, B = ${large}`);
  }
  if (!(smallSq >= 0 && largeSq >= 0)) throw new RangeError(`noiseScaleOf: squared norms must be >= 0, got ${smallSq}, ${largeSq}`);
  const gradSq = (large * largeSq - small * smallSq) / (large - small);
  const traceSigma = (smallSq - largeSq) / (1 / small - 1 / large);
  return { small, large, gradSq, traceSigma, bSimple: gradSq > 0 ? traceSigma / gradSq : null };
}

/** |v|^2 in float64. */
export function sqNorm(v: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  return s;
}

/**
 * Measures B_simple on `model` as it stands: `ids` (a multiple of `small` long) split into
 * disjoint batches of `small`, each one's mean gradient read back. Loads with `epoch`'s
 * augmentation. Changes no weights and no optimiser state; it overwrites the gradient buffer
 * (every step recomputes it), and a model with batch normalisation would fold these batches
 * into its running statistics (forward in training mode).
 */
export async function measureNoiseScale<T extends TensorLike>(
  engine: Engine<T>, model: Model<T>, loader: BatchSource, ids: readonly number[], small: number, epoch: number, seed: number,
): Promise<NoiseScale> {
  const k = ids.length / small;
  if (!(Number.isInteger(k) && k >= 2)) throw new RangeError(`measureNoiseScale: ids (${ids.length}) must be at least 2 batches of ${small}`);
  let sum: Float64Array | null = null;
  let smallSq = 0;
  let x: T | null = null;
  try {
    for (let i = 0; i < k; i++) {
      const batch = await loader.load(ids.slice(i * small, (i + 1) * small), epoch);
      x = uploadBatch(model, batch, x);
      recordGradients(model, x, seed + i);
      const g = await engine.readF32(model.grads);
      sum ??= new Float64Array(g.length);
      let sq = 0;
      for (let j = 0; j < g.length; j++) {
        sum[j] = sum[j]! + g[j]!;
        sq += g[j]! * g[j]!;
      }
      smallSq += sq / (small * small) / k;
    }
  } finally {
    if (x) engine.release(x);
  }
  return noiseScaleOf(smallSq, sqNorm(sum!) / (ids.length * ids.length), small, ids.length);
}
