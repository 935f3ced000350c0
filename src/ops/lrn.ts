// Local response normalisation across channels, PyTorch's LocalResponseNorm:
//   y_c = x_c / (k + alpha / size * sum over the `size` channels around c of x^2)^beta,
// the window being c - floor(size/2) .. c + floor((size-1)/2), clipped to [0, C) (channels
// outside count as zero; the divisor is always `size`). Formulas in shaders/lrn.wgsl.
import code from '../../shaders/lrn.wgsl?raw';
import { check } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { type Tensor, shapeStr } from '../gpu/tensor.ts';
import { type LrnParams, lrnDims } from '../shapes/lrn.ts';
import { batchSlices } from './pool.ts';

// The shape rules live in src/shapes/lrn.ts; re-exported for the ops namespace.
export type { LrnDims, LrnParams } from '../shapes/lrn.ts';
export { ALEXNET_LRN, lrnDims } from '../shapes/lrn.ts';

const KERNEL: Kernel = { name: 'lrn', code };
const WG = 256;

/** `bindings`: x, dy, out, y in the shader's order (null where the entry point has none). */
function run(gpu: Gpu, entryPoint: 'forward' | 'backward', bindings: readonly (Tensor | null)[], params: LrnParams, what: string): void {
  const x = bindings[0]!;
  const d = lrnDims(x.shape, params, what);
  for (const t of bindings) {
    check(!t || t.size === x.size, what, () => `every tensor must have x's ${x.size} elements (x ${shapeStr(x.shape)}), got ${shapeStr(t!.shape)}`);
  }
  for (const s of batchSlices(gpu, bindings, what)) {
    gpu.dispatch1d(
      {
        kernel: { ...KERNEL, entryPoint },
        constants: { WG },
        uniforms: [
          ['u32', s.count], ['u32', d.c], ['u32', d.hw], ['u32', s.skips[0]!], ['u32', params.size], ['f32', params.alpha], ['f32', params.beta],
          ['f32', params.k],
        ],
        bindings: s.views,
      },
      Math.ceil((s.count * d.c * d.hw) / WG),
    );
  }
}

// x [N, C, H, W] -> y [N, C, H, W]
export function lrnForward(gpu: Gpu, x: Tensor, y: Tensor, params: LrnParams): void {
  run(gpu, 'forward', [x, null, y, null], params, 'lrn.forward');
}

// x (forward's input), y (forward's output), dy [N, C, H, W] -> dx [N, C, H, W] (written, not added)
export function lrnBackward(gpu: Gpu, x: Tensor, y: Tensor, dy: Tensor, dx: Tensor, params: LrnParams): void {
  run(gpu, 'backward', [x, dy, dx, y], params, 'lrn.backward');
}
