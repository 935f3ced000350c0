// Local response normalisation across channels, PyTorch's LocalResponseNorm:
//   y_c = x_c / (k + alpha / size * sum over the `size` channels around c of x^2)^beta,
// the window being c - floor(size/2) .. c + floor((size-1)/2), clipped to [0, C) (channels
// outside count as zero; the divisor is always `size`). Formulas in shaders/lrn.wgsl.
import code from '../../shaders/lrn.wgsl?raw';
import { check } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { type Tensor, shapeStr } from '../gpu/tensor.ts';
import { batchSlices } from './pool.ts';

export interface LrnParams { size: number; alpha: number; beta: number; k: number }

/** AlexNet's setting (Krizhevsky et al. 2012). */
export const ALEXNET_LRN: LrnParams = { size: 5, alpha: 1e-4, beta: 0.75, k: 2 };

export interface LrnDims { n: number; c: number; hw: number }

/** The shape function: y and dx have x's shape ([N, C, ...], normalised along dim 1). */
export function lrnDims(shape: readonly number[], params: LrnParams, what = 'lrn'): LrnDims {
  check(shape.length >= 2 && shape.every((d) => Number.isInteger(d) && d >= 1), what, () => `x must be [N, C, ...] with non-empty dimensions, got ${shapeStr(shape)}`);
  check(Number.isInteger(params.size) && params.size >= 1, what, () => `size must be an integer >= 1, got ${params.size}`);
  check(params.k > 0 && params.alpha >= 0, what, () => `need k > 0 and alpha >= 0 (the base of the power stays positive), got k ${params.k}, alpha ${params.alpha}`);
  return { n: shape[0]!, c: shape[1]!, hw: shape.slice(2).reduce((a, b) => a * b, 1) };
}

const KERNEL: Kernel = { name: 'lrn', code };
const WG = 256;

/** `bindings`: x, dy, out, y in the shader's order (null where the entry point has none). */
function run(gpu: Gpu, entryPoint: 'forward' | 'backward', bindings: readonly (Tensor | null)[], params: LrnParams, what: string): void {
  const x = bindings[0]!;
  const d = lrnDims(x.shape, params, what);
  for (const t of bindings) check(!t || t.size === x.size, what, () => `every tensor must have x's ${x.size} elements (x ${shapeStr(x.shape)}), got ${shapeStr(t!.shape)}`);
  for (const s of batchSlices(gpu, bindings, what)) {
    gpu.dispatch1d(
      {
        kernel: { ...KERNEL, entryPoint },
        constants: { WG },
        uniforms: [['u32', s.count], ['u32', d.c], ['u32', d.hw], ['u32', s.skips[0]!], ['u32', params.size], ['f32', params.alpha], ['f32', params.beta], ['f32', params.k]],
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
