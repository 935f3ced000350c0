// Inverted dropout: keep each element with probability 1 - p and scale it by 1 / (1 - p).
// The mask is a counter-based hash of (seed, flat element index) (shaders/dropout.wgsl,
// the same integer hash in src/ref/dropout.ts), so it is reproducible on every machine and
// backward recomputes it from the seed: no mask tensor. Callers give every dropout layer and
// step its own seed (e.g. a hash of step and layer), or the masks repeat.
import code from '../../shaders/dropout.wgsl?raw';
import { check } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { type Tensor, shapeStr } from '../gpu/tensor.ts';
import { type DropoutParams, dropoutScale, dropoutShape, dropoutThreshold } from '../shapes/dropout.ts';
import { bindingRanges } from './elementwise.ts';

// The shape rules and mask constants live in src/shapes/dropout.ts; re-exported for the ops namespace.
export type { DropoutParams } from '../shapes/dropout.ts';
export { dropoutScale, dropoutShape, dropoutThreshold } from '../shapes/dropout.ts';

const KERNEL: Kernel = { name: 'dropout', code, entryPoint: 'apply' };
const WG = 256;

function run(gpu: Gpu, inp: Tensor, out: Tensor, params: DropoutParams, what: string): void {
  dropoutShape(inp.shape, params);
  check(out.size === inp.size, what, () => `output ${shapeStr(out.shape)} must have the input's ${inp.size} elements (${shapeStr(inp.shape)})`);
  for (const [s, n] of bindingRanges(gpu, inp.size)) {
    gpu.dispatch1d(
      {
        kernel: KERNEL,
        constants: { WG },
        uniforms: [['u32', n], ['u32', s], ['u32', params.seed], ['u32', dropoutThreshold(params.p)], ['f32', dropoutScale(params.p)]],
        bindings: [gpu.view(inp, s, [n]), gpu.view(out, s, [n])],
      },
      Math.ceil(n / WG),
    );
  }
}

// x [any] -> y [same]: y = x * mask / (1 - p)   (y a different buffer from x)
export function dropoutForward(gpu: Gpu, x: Tensor, y: Tensor, params: DropoutParams): void {
  run(gpu, x, y, params, 'dropout.forward');
}

// dy [any] -> dx [same]: dx = dy * mask / (1 - p), the mask recomputed from params.seed (written, not added)
export function dropoutBackward(gpu: Gpu, dy: Tensor, dx: Tensor, params: DropoutParams): void {
  run(gpu, dy, dx, params, 'dropout.backward');
}
