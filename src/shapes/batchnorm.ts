// Shape rules of batch normalisation over the channels of NCHW [N, C, H, W] or the features of
// [N, F]: params and dims. Pure: shared by the WebGPU kernels (src/ops/batchnorm.ts), the wasm
// engine and the float64 reference.
import { check } from '../errors.ts';
import { shapeStr } from './shape.ts';

export interface BatchNormParams {
  /** Added to the variance before the square root (PyTorch's default 1e-5). */
  eps: number;
  /** Weight of the batch statistics in the running ones (PyTorch's default 0.1). */
  momentum: number;
}

export interface BatchNormBackwardParams {
  /** dgamma += and dbeta += (a flat gradient buffer summed into) instead of =. */
  accumulate: boolean;
}

export interface BatchNormDims { n: number; c: number; hw: number }

/** The shape function: y and dx have x's shape; gamma, beta, the statistics and dgamma, dbeta are [C]. */
export function batchNormDims(shape: readonly number[]): BatchNormDims {
  check(shape.length === 2 || shape.length === 4, 'batchNorm', () => `x must be [N, C, H, W] or [N, F], got ${shapeStr(shape)}`);
  check(shape.every((d) => Number.isInteger(d) && d >= 1), 'batchNorm', () => `x ${shapeStr(shape)} has an empty or non-integer dimension`);
  const [n, c] = shape as [number, number];
  return { n, c, hw: shape.length === 4 ? shape[2]! * shape[3]! : 1 };
}

/** A tensor as the operand checks see it, on either engine. */
export interface Operand { readonly shape: readonly number[]; readonly size: number }

/** The operands of a batch-norm op of `what`: those in `same` have x's size, those in `perChannel` one value per channel. */
export function checkBatchNormOperands(what: string, x: Operand, same: Record<string, Operand>, perChannel: Record<string, Operand>): BatchNormDims {
  const d = batchNormDims(x.shape);
  for (const [name, t] of Object.entries(same)) {
    check(t.size === x.size, what, () => `${name} ${shapeStr(t.shape)} must have x's ${x.size} elements (x ${shapeStr(x.shape)})`);
  }
  for (const [name, t] of Object.entries(perChannel)) {
    check(t.size === d.c, what, () => `${name} must have one value per channel (${d.c}), got ${shapeStr(t.shape)}`);
  }
  return d;
}
