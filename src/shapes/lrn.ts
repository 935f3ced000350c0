// Shape rules of local response normalisation across channels: params, AlexNet's setting and
// dims. Pure: shared by the WebGPU kernels (src/ops/lrn.ts), the wasm engine, the model graph
// and the float64 reference.
import { check } from '../errors.ts';
import { shapeStr } from './shape.ts';

export interface LrnParams { size: number; alpha: number; beta: number; k: number }

/** AlexNet's setting (Krizhevsky et al. 2012). */
export const ALEXNET_LRN: LrnParams = { size: 5, alpha: 1e-4, beta: 0.75, k: 2 };

export interface LrnDims { n: number; c: number; hw: number }

/** The shape function: y and dx have x's shape ([N, C, ...], normalised along dim 1). */
export function lrnDims(shape: readonly number[], params: LrnParams, what = 'lrn'): LrnDims {
  check(shape.length >= 2 && shape.every((d) => Number.isInteger(d) && d >= 1), what,
    () => `x must be [N, C, ...] with non-empty dimensions, got ${shapeStr(shape)}`);
  check(Number.isInteger(params.size) && params.size >= 1, what, () => `size must be an integer >= 1, got ${params.size}`);
  check(params.k > 0 && params.alpha >= 0, what,
    () => `need k > 0 and alpha >= 0 (the base of the power stays positive), got k ${params.k}, alpha ${params.alpha}`);
  return { n: shape[0]!, c: shape[1]!, hw: shape.slice(2).reduce((a, b) => a * b, 1) };
}
