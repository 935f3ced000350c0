// Elementwise arithmetic on flat tensors of equal size (any shape): residual add, gradient
// accumulation, scaling, axpy and fill. Arrays larger than one storage binding are split.
import code from '../../shaders/eltwise.wgsl?raw';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { eltwiseSize } from '../shapes/eltwise.ts';
import { bindingRanges } from './elementwise.ts';

// The shape rule lives in src/shapes/eltwise.ts; re-exported for the ops namespace.
export { eltwiseSize } from '../shapes/eltwise.ts';

const KERNEL: Kernel = { name: 'eltwise', code };
const WG = 256;

type Entry = 'add' | 'addInPlace' | 'scale' | 'scaleInPlace' | 'axpy' | 'fill';

function run(gpu: Gpu, entryPoint: Entry, a: number, x: Tensor | null, y: Tensor | null, out: Tensor): void {
  eltwiseSize(out.size, ...[x, y].flatMap((t) => (t ? [t.size] : [])));
  for (const [s, n] of bindingRanges(gpu, out.size)) {
    const v = (t: Tensor | null): Tensor | null => (t ? gpu.view(t, s, [n]) : null);
    gpu.dispatch1d(
      { kernel: { ...KERNEL, entryPoint }, constants: { WG }, uniforms: [['u32', n], ['f32', a]], bindings: [v(x), v(y), v(out)] },
      Math.ceil(n / WG),
    );
  }
}

// x, y, z [any, same size]: z = x + y
export function add(gpu: Gpu, x: Tensor, y: Tensor, z: Tensor): void {
  run(gpu, 'add', 0, x, y, z);
}

// x, y [any, same size]: x += y
export function addInPlace(gpu: Gpu, x: Tensor, y: Tensor): void {
  run(gpu, 'addInPlace', 0, null, y, x);
}

// x, y [any, same size]: y = a * x
export function scale(gpu: Gpu, x: Tensor, a: number, y: Tensor): void {
  run(gpu, 'scale', a, x, null, y);
}

// x [any]: x *= a
export function scaleInPlace(gpu: Gpu, x: Tensor, a: number): void {
  run(gpu, 'scaleInPlace', a, null, null, x);
}

// x, y [any, same size]: y += a * x
export function axpy(gpu: Gpu, a: number, x: Tensor, y: Tensor): void {
  run(gpu, 'axpy', a, x, null, y);
}

// x [any]: x = a
export function fill(gpu: Gpu, x: Tensor, a: number): void {
  run(gpu, 'fill', a, null, null, x);
}
