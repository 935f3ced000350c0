// Shape rules of the per-channel bias add (NCHW [N, C, H, W] or [N, F]): params and dims.
// Pure: shared by the WebGPU kernels (src/ops/bias.ts), the wasm engine and the float64 reference.
import { check } from '../errors.ts';
import { shapeStr } from './shape.ts';

export interface BiasBackwardParams {
  /** db += sum (gradients of several uses, or a flat gradient buffer summed into) instead of db = sum. */
  accumulate: boolean;
}

export interface BiasDims { n: number; c: number; hw: number }

/** The shape function: y has x's shape, b and db are [C] where C = shape[1]. */
export function biasDims(shape: readonly number[]): BiasDims {
  check(shape.length === 2 || shape.length === 4, 'bias', () => `x must be [N, C, H, W] or [N, F], got ${shapeStr(shape)}`);
  const [n, c] = shape as [number, number];
  return { n, c, hw: shape.length === 4 ? shape[2]! * shape[3]! : 1 };
}
