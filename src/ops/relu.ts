// ReLU. forward(x) -> y = max(x, 0); backward(x, dy) -> dx = dy * (x > 0).
// Shapes: any; x, y, dx, dy have the same number of elements.
import code from '../../shaders/relu.wgsl?raw';
import { check } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { bindingRanges } from './elementwise.ts';

const KERNEL: Kernel = { name: 'relu', code };
const WG = 256;

function run(gpu: Gpu, entryPoint: 'forward' | 'backward', x: Tensor, out: Tensor, dy: Tensor | null): void {
  check(out.size === x.size && (!dy || dy.size === x.size), `relu.${entryPoint}`,
    () => `sizes differ: x ${x.size}, out ${out.size}${dy ? `, dy ${dy.size}` : ''}`);
  for (const [s, n] of bindingRanges(gpu, x.size)) {
    const v = (t: Tensor) => gpu.view(t, s, [n]);
    gpu.dispatch1d(
      { kernel: { ...KERNEL, entryPoint }, constants: { WG }, uniforms: [['u32', n]], bindings: [v(x), v(out), dy ? v(dy) : null] },
      Math.ceil(n / WG),
    );
  }
}

/** y = max(x, 0), written into `y` (a different buffer: WebGPU forbids a read and a write binding of the same range). */
export function reluForward(gpu: Gpu, x: Tensor, y: Tensor): void {
  run(gpu, 'forward', x, y, null);
}

/** dx = dy where x > 0 else 0. `x` is the forward input. */
export function reluBackward(gpu: Gpu, x: Tensor, dy: Tensor, dx: Tensor): void {
  run(gpu, 'backward', x, dx, dy);
}
