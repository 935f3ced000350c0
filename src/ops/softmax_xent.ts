// Softmax cross-entropy with integer labels: per-sample loss, their sum, and dlogits, all from
// one read of the logits (the loss layer is always followed by its own backward in training).
import code from '../../shaders/softmax_xent.wgsl?raw';
import type { TensorLike } from '../backend/engine.ts';
import { check, VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';

const KERNEL: Kernel = { name: 'softmax_xent', code };

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
export function softmaxXentDims(logits: TensorLike, labels: TensorLike, dlogits: TensorLike, losses: TensorLike, total: TensorLike, what = 'softmaxXent'): { n: number; k: number } {
  const { n, k } = logitsDims(logits.shape, what);
  check(labels.dtype === 'i32' && labels.size === n, what, () => `labels must be i32 [${n}], got ${labels.dtype} ${shapeStr(labels.shape)}`);
  check(dlogits.size === n * k, what, () => `dlogits must be [${n}, ${k}], got ${shapeStr(dlogits.shape)}`);
  check(losses.size === n, what, () => `losses must be [${n}], got ${shapeStr(losses.shape)}`);
  check(total.size === 1, what, () => `total must be [1], got ${shapeStr(total.shape)}`);
  return { n, k };
}

// logits [N, K], labels [N] i32 -> dlogits [N, K], losses [N], total [1]
// A label outside [0, K) gives a NaN loss (so total is NaN) and a zero dlogits row; labels are
// validated when data is loaded, this only keeps a bad one from reading out of bounds.
export function softmaxXent(gpu: Gpu, logits: Tensor, labels: Tensor, dlogits: Tensor, losses: Tensor, total: Tensor, params: SoftmaxXentParams): void {
  const what = 'softmaxXent';
  const { n, k } = softmaxXentDims(logits, labels, dlogits, losses, total, what);
  if (n * k * 4 > gpu.maxBindingBytes) {
    throw new VtError('too-large', `${what}: logits ${shapeStr(logits.shape)} exceed one storage binding (${gpu.maxBindingBytes} bytes): use a smaller batch.`);
  }
  // Small K (CIFAR's 10) would leave most of a 256-wide workgroup idle.
  const WG = k <= 64 ? 64 : 256;
  const uniforms: Scalar[] = [['u32', n], ['u32', k], ['f32', params.gradScale], ['f32', smoothingOf(params, what)]];
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint: 'forward' }, constants: { WG }, uniforms, bindings: [logits, labels, dlogits, losses, null] }, n);
  gpu.dispatch({ kernel: { ...KERNEL, entryPoint: 'sumLosses' }, constants: { WG: 256 }, uniforms, bindings: [null, null, null, losses, total], workgroups: [1] });
}
