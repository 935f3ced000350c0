// float64 reference: batch normalisation (training and inference), conventions as in
// src/ops/batchnorm.ts: biased variance to normalise, unbiased for running_var.
import { batchNormDims, type BatchNormParams } from '../shapes/batchnorm.ts';

/** Calls f(channel, index) for every element, channel by channel. */
function eachInChannel(shape: readonly number[], f: (c: number, i: number) => void): void {
  const { n, c, hw } = batchNormDims(shape);
  for (let ch = 0; ch < c; ch++)
    for (let b = 0; b < n; b++)
      for (let j = 0; j < hw; j++) f(ch, (b * c + ch) * hw + j);
}

export interface BatchNormForwardResult {
  y: Float64Array; mean: Float64Array; invstd: Float64Array;
  runningMean: Float64Array; runningVar: Float64Array;
}

export function batchNormForward(
  x: Float64Array, shape: readonly number[], gamma: Float64Array, beta: Float64Array,
  runningMean: Float64Array, runningVar: Float64Array, params: BatchNormParams,
): BatchNormForwardResult {
  const { n, c, hw } = batchNormDims(shape);
  const m = n * hw;
  const mean = new Float64Array(c), ssd = new Float64Array(c);
  eachInChannel(shape, (ch, i) => (mean[ch] += x[i]! / m));
  eachInChannel(shape, (ch, i) => (ssd[ch] += (x[i]! - mean[ch]!) ** 2));
  const invstd = ssd.map((s) => 1 / Math.sqrt(s / m + params.eps));
  const y = new Float64Array(x.length);
  eachInChannel(shape, (ch, i) => (y[i] = (x[i]! - mean[ch]!) * invstd[ch]! * gamma[ch]! + beta[ch]!));
  const mo = params.momentum;
  return {
    y, mean, invstd,
    runningMean: runningMean.map((r, ch) => (1 - mo) * r + mo * mean[ch]!),
    runningVar: runningVar.map((r, ch) => (1 - mo) * r + mo * (ssd[ch]! / Math.max(m - 1, 1))),
  };
}

export function batchNormInference(
  x: Float64Array, shape: readonly number[], gamma: Float64Array, beta: Float64Array,
  runningMean: Float64Array, runningVar: Float64Array, eps: number,
): Float64Array {
  const y = new Float64Array(x.length);
  eachInChannel(shape, (ch, i) => (y[i] = ((x[i]! - runningMean[ch]!) / Math.sqrt(runningVar[ch]! + eps)) * gamma[ch]! + beta[ch]!));
  return y;
}

/** dx, dgamma, dbeta of the training-mode forward (mean and invstd from it). */
export function batchNormBackward(
  x: Float64Array, dy: Float64Array, shape: readonly number[], gamma: Float64Array,
  mean: Float64Array, invstd: Float64Array,
): { dx: Float64Array; dgamma: Float64Array; dbeta: Float64Array } {
  const { n, c, hw } = batchNormDims(shape);
  const m = n * hw;
  const dgamma = new Float64Array(c), dbeta = new Float64Array(c);
  const xhat = (ch: number, i: number): number => (x[i]! - mean[ch]!) * invstd[ch]!;
  eachInChannel(shape, (ch, i) => {
    dbeta[ch] += dy[i]!;
    dgamma[ch] += dy[i]! * xhat(ch, i);
  });
  const dx = new Float64Array(x.length);
  eachInChannel(shape, (ch, i) => {
    dx[i] = gamma[ch]! * invstd[ch]! * (dy[i]! - dbeta[ch]! / m - (xhat(ch, i) * dgamma[ch]!) / m);
  });
  return { dx, dgamma, dbeta };
}
