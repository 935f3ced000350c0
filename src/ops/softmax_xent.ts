// Softmax cross-entropy with integer labels: per-sample loss, their sum, and dlogits, all from
// one read of the logits (the loss layer is always followed by its own backward in training).
import code from '../../shaders/softmax_xent.wgsl?raw';
import { VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { type SoftmaxXentParams, smoothingOf, softmaxXentDims } from '../shapes/softmax_xent.ts';

// The shape rules live in src/shapes/softmax_xent.ts; re-exported for the ops namespace.
export type { SoftmaxXentParams } from '../shapes/softmax_xent.ts';
export { logitsDims, smoothingOf, softmaxXentDims } from '../shapes/softmax_xent.ts';

const KERNEL: Kernel = { name: 'softmax_xent', code };

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
  gpu.dispatch({
    kernel: { ...KERNEL, entryPoint: 'sumLosses' }, constants: { WG: 256 }, uniforms, bindings: [null, null, null, losses, total], workgroups: [1],
  });
}
