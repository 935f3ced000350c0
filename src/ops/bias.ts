// Bias add per channel (NCHW [N, C, H, W]) or per feature ([N, F], treated as H = W = 1).
// forward(x, b) -> y = x + b[c]; backward(dy) -> db[c] = sum over n, h, w of dy.
import code from '../../shaders/bias.wgsl?raw';
import { check, VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import { type BiasBackwardParams, type BiasDims, biasDims } from '../shapes/bias.ts';
import { bindingRanges } from './elementwise.ts';

// The shape rules live in src/shapes/bias.ts; re-exported for the ops namespace.
export type { BiasBackwardParams, BiasDims } from '../shapes/bias.ts';
export { biasDims } from '../shapes/bias.ts';

const KERNEL: Kernel = { name: 'bias', code };
const WG = 256;

function checkBias(what: string, x: Tensor, b: Tensor): BiasDims {
  const d = biasDims(x.shape);
  check(b.size === d.c, what, () => `bias has ${b.size} values for ${d.c} channels of x ${shapeStr(x.shape)}`);
  return d;
}

function add(gpu: Gpu, entryPoint: 'forward' | 'forwardInPlace', x: Tensor | null, b: Tensor, y: Tensor, d: BiasDims): void {
  for (const [s, n] of bindingRanges(gpu, y.size)) {
    gpu.dispatch1d(
      {
        kernel: { ...KERNEL, entryPoint },
        constants: { WG },
        uniforms: [['u32', n], ['u32', d.c], ['u32', d.hw], ['u32', s], ['u32', 0]],
        bindings: [x ? gpu.view(x, s, [n]) : null, b, gpu.view(y, s, [n])],
      },
      Math.ceil(n / WG),
    );
  }
}

// x [N, C, H, W] or [N, F], b [C] -> y (same shape as x; a different buffer from x)
export function biasForward(gpu: Gpu, x: Tensor, b: Tensor, y: Tensor): void {
  const d = checkBias('biasForward', x, b);
  check(y.size === x.size, 'biasForward', () => `y has ${y.size} elements, x ${shapeStr(x.shape)} has ${x.size}`);
  add(gpu, 'forward', x, b, y, d);
}

// x [N, C, H, W] or [N, F] (updated in place), b [C]
export function biasAddInPlace(gpu: Gpu, x: Tensor, b: Tensor): void {
  add(gpu, 'forwardInPlace', null, b, x, checkBias('biasAddInPlace', x, b));
}

// dy [N, C, H, W] or [N, F] -> db [C] (= or += by params.accumulate)
// A dy larger than one storage binding is reduced in batch slices that fit, each added into
// db in order (still a fixed order, so still reproducible).
export function biasBackward(gpu: Gpu, dy: Tensor, db: Tensor, params: BiasBackwardParams): void {
  const d = checkBias('biasBackward', dy, db);
  const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
  const perSample = d.c * d.hw;
  // A slice starts at an aligned element at most align - 1 before its first sample.
  const maxElems = Math.floor(gpu.maxBindingBytes / 4);
  const slice = Math.floor((maxElems - (align - 1)) / Math.max(1, perSample));
  if (slice < 1) {
    throw new VtError('too-large', `biasBackward: one sample of dy ${shapeStr(dy.shape)} is larger than one storage binding (${gpu.maxBindingBytes} bytes): `
      + 'use smaller images or fewer channels.');
  }
  for (let n0 = 0; n0 < d.n; n0 += slice) {
    const nb = Math.min(slice, d.n - n0);
    const first = n0 * perSample;
    const start = first - (first % align);
    gpu.dispatch1d(
      {
        kernel: { ...KERNEL, entryPoint: 'backward' },
        constants: { WG },
        uniforms: [['u32', nb], ['u32', d.c], ['u32', d.hw], ['u32', first - start], ['u32', params.accumulate || n0 > 0 ? 1 : 0]],
        bindings: [gpu.view(dy, start, [first + nb * perSample - start]), null, db],
      },
      d.c,
    );
  }
}
