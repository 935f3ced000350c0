// Shape rules and mask constants of inverted dropout: params, shape, the hash threshold and the
// kept-value scale. Pure: shared by the WebGPU kernel (src/ops/dropout.ts), the wasm engine and
// the float64 reference.
import { check } from '../errors.ts';

export interface DropoutParams {
  /** Probability of dropping an element, in [0, 1). */
  p: number;
  /** u32 seed of the mask. */
  seed: number;
}

/** The shape function: y and dx have x's shape. Also validates the params. */
export function dropoutShape(shape: readonly number[], params: DropoutParams): number[] {
  check(params.p >= 0 && params.p < 1, 'dropout', () => `p must be in [0, 1), got ${params.p}`);
  check(Number.isInteger(params.seed) && params.seed >= 0 && params.seed <= 0xffffffff, 'dropout', () => `seed must be a u32, got ${params.seed}`);
  return [...shape];
}

/** Elements whose hash is below this are dropped: floor(p * 2^32), so P(keep) = 1 - p to 2^-32. */
export function dropoutThreshold(p: number): number {
  return Math.min(0xffffffff, Math.floor(p * 2 ** 32));
}

/** The kept-value scale as the shader uses it: 1 / (1 - p) rounded to f32. */
export function dropoutScale(p: number): number {
  return Math.fround(1 / (1 - p));
}
