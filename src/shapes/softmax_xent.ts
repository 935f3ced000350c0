// Shape rules of softmax cross-entropy with integer labels: params, the label smoothing check,
// the logits' dims and the check of every operand. Pure: shared by the WebGPU kernel
// (src/ops/softmax_xent.ts), the wasm engine, top-k and the float64 references.
import { check } from '../errors.ts';
import { type Shaped, shapeStr } from './shape.ts';

export interface SoftmaxXentParams {
  /**
   * dlogits = (softmax - onehot) * gradScale: 1/N for the mean over this batch, or 1 for the
   * sum when the distributed trainer divides by the global batch later.
   */
  gradScale: number;
  /**
   * Label smoothing eps in [0, 1): the target is (1 - eps) onehot + eps / K. 0 (the default)
   * is plain cross-entropy, bit for bit.
   */
  smoothing?: number;
}

/** The smoothing of `params`, checked: a number in [0, 1). */
export function smoothingOf(params: SoftmaxXentParams, what = 'softmaxXent'): number {
  const eps = params.smoothing ?? 0;
  check(Number.isFinite(eps) && eps >= 0 && eps < 1, what, () => `label smoothing must be in [0, 1), got ${eps}`);
  return eps;
}

/** The shape function: logits [N, K] -> losses [N], total [1], dlogits [N, K]. */
export function logitsDims(logitsShape: readonly number[], what = 'softmaxXent'): { n: number; k: number } {
  check(logitsShape.length === 2 && logitsShape[1]! >= 1, what, () => `logits must be [N, K] with K >= 1, got ${shapeStr(logitsShape)}`);
  return { n: logitsShape[0]!, k: logitsShape[1]! };
}

/** Checks every operand of softmaxXent (any engine's tensors); returns N and K. */
export function softmaxXentDims(
  logits: Shaped, labels: Shaped, dlogits: Shaped, losses: Shaped, total: Shaped, what = 'softmaxXent',
): { n: number; k: number } {
  const { n, k } = logitsDims(logits.shape, what);
  check(labels.dtype === 'i32' && labels.size === n, what, () => `labels must be i32 [${n}], got ${labels.dtype} ${shapeStr(labels.shape)}`);
  check(dlogits.size === n * k, what, () => `dlogits must be [${n}, ${k}], got ${shapeStr(dlogits.shape)}`);
  check(losses.size === n, what, () => `losses must be [${n}], got ${shapeStr(losses.shape)}`);
  check(total.size === 1, what, () => `total must be [1], got ${shapeStr(total.shape)}`);
  return { n, k };
}
