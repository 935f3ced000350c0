// 2-D pooling, NCHW: max pool (with argmax for backward), average pool and global average
// pool. Kernels in shaders/pool.wgsl: forward is one invocation per output; backward is a
// gather, one invocation per dx element summing over the (possibly overlapping) windows that
// contain it, so there are no atomics and the summation order is fixed.
// Semantics (PyTorch's, floor mode): OH = floor((H + 2*ph - KH) / sh) + 1; padding never
// wins a max; average pool divides by the number of in-image elements of the window
// (count_include_pad = false); max ties go to the first max in row-major window order.
// NaN inputs are not propagated specially (a NaN never beats the running max).
import code from '../../shaders/pool.wgsl?raw';
import { VtError, check } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { type Tensor, shapeStr } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { type Pool2dParams, type PoolGeometry, globalPoolParams, normalizePool2d } from '../shapes/pool.ts';

// The shape rules live in src/shapes/pool.ts; re-exported for the ops namespace.
export type { Pool2dParams, PoolGeometry } from '../shapes/pool.ts';
export { globalPoolParams, normalizePool2d, pool2dShape } from '../shapes/pool.ts';

// ---- batch slices (shared by the per-sample ops: pool, lrn, batchnorm) -------------------

/**
 * Samples [n0, n0 + count) of tensors that all have the batch as dim 0. Each view starts at
 * the aligned element at or before the slice's first sample; `skips[k]` elements of view k
 * precede that sample (kernels add it to their indices). Null tensors stay null (skip 0), so
 * a kernel's binding list can be sliced as it is.
 */
export interface BatchSlice { n0: number; count: number; views: (Tensor | null)[]; skips: number[] }

/**
 * Splits the batch so each tensor's slice fits one storage binding (gpu.maxBindingBytes).
 * One slice when everything fits; a 'too-large' VtError when one sample does not.
 */
export function batchSlices(gpu: Gpu, tensors: readonly (Tensor | null)[], what: string): BatchSlice[] {
  const n = tensors.find((t) => t !== null)!.shape[0]!;
  const per = tensors.map((t) => (t ? t.size / n : 0));
  const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
  const maxElems = Math.floor(gpu.maxBindingBytes / 4);
  const biggest = Math.max(1, ...per);
  const fits = per.every((e) => e * n <= maxElems);
  const step = fits ? n : Math.floor((maxElems - (align - 1)) / biggest);
  if (step < 1) {
    throw new VtError('too-large', `${what}: one sample (${biggest * 4} bytes) does not fit one storage binding (${gpu.maxBindingBytes} bytes): `
      + 'use smaller images or fewer channels.');
  }
  const out: BatchSlice[] = [];
  for (let n0 = 0; n0 < n; n0 += step) {
    const count = Math.min(step, n - n0);
    const firsts = per.map((e) => n0 * e);
    const skips = firsts.map((f) => f % align);
    out.push({
      n0, count, skips,
      views: tensors.map((t, k) => (t ? gpu.view(t, firsts[k]! - skips[k]!, [skips[k]! + count * per[k]!]) : null)),
    });
  }
  return out;
}

// ---- dispatch ------------------------------------------------------------------------------

const KERNEL: Kernel = { name: 'pool', code };
const WG = 256;

type Entry = 'maxForward' | 'avgForward' | 'maxBackward' | 'avgBackward';

function uniforms(g: PoolGeometry, planes: number, xoff: number, yoff: number): Scalar[] {
  return [planes, g.h, g.w, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, xoff, yoff].map((v) => ['u32', v] as Scalar);
}

function checkShape(t: Tensor, shape: readonly number[], dtype: Tensor['dtype'], what: string, name: string): void {
  check(t.size === shape.reduce((a, b) => a * b, 1) && t.dtype === dtype, what,
    () => `${name} must be ${dtype} ${shapeStr(shape)}, got ${t.dtype} ${shapeStr(t.shape)}`);
}

/** Geometry of a max pool whose output-side tensors are `out` (y or dy, f32) and `argmax` (u32). */
function checkMax(xShape: readonly number[], out: Tensor, argmax: Tensor, params: Pool2dParams, what: string, name: string): PoolGeometry {
  const g = normalizePool2d(xShape, params, what);
  const oshape = [g.n, g.c, g.oh, g.ow];
  checkShape(out, oshape, 'f32', what, name);
  checkShape(argmax, oshape, 'u32', what, 'argmax');
  return g;
}

/**
 * Runs one entry point over batch slices. `bindings` in the shader's order: x, out (y or dx),
 * argOut, argIn, dy; null where the entry point has none.
 */
function run(gpu: Gpu, entry: Entry, g: PoolGeometry, bindings: readonly (Tensor | null)[], what: string): void {
  const forward = entry.endsWith('Forward');
  // Offsets from the [N, C, H, W] tensor (x or dx) and an [N, C, OH, OW] one (y or dy).
  const [xk, yk] = forward ? [0, 1] : [1, 4];
  for (const s of batchSlices(gpu, bindings, what)) {
    gpu.dispatch1d(
      {
        kernel: { ...KERNEL, entryPoint: entry },
        constants: { WG },
        uniforms: uniforms(g, s.count * g.c, s.skips[xk]!, s.skips[yk]!),
        bindings: s.views,
      },
      Math.ceil((s.count * g.c * (forward ? g.oh * g.ow : g.h * g.w)) / WG),
    );
  }
}

// x [N, C, H, W] -> y f32 [N, C, OH, OW], argmax u32 [N, C, OH, OW] (index iy*W + ix in the plane)
export function maxPoolForward(gpu: Gpu, x: Tensor, y: Tensor, argmax: Tensor, params: Pool2dParams): void {
  const what = 'maxPool.forward';
  run(gpu, 'maxForward', checkMax(x.shape, y, argmax, params, what, 'y'), [x, y, argmax, null, null], what);
}

// dy [N, C, OH, OW], argmax u32 [N, C, OH, OW] (from forward) -> dx [N, C, H, W] (written, not added)
export function maxPoolBackward(gpu: Gpu, dy: Tensor, argmax: Tensor, dx: Tensor, params: Pool2dParams): void {
  const what = 'maxPool.backward';
  run(gpu, 'maxBackward', checkMax(dx.shape, dy, argmax, params, what, 'dy'), [null, dx, null, argmax, dy], what);
}

// x [N, C, H, W] -> y [N, C, OH, OW]; y = mean of the in-image part of each window
export function avgPoolForward(gpu: Gpu, x: Tensor, y: Tensor, params: Pool2dParams): void {
  const what = 'avgPool.forward';
  const g = normalizePool2d(x.shape, params, what);
  checkShape(y, [g.n, g.c, g.oh, g.ow], 'f32', what, 'y');
  run(gpu, 'avgForward', g, [x, y, null, null, null], what);
}

// dy [N, C, OH, OW] -> dx [N, C, H, W] (written, not added)
export function avgPoolBackward(gpu: Gpu, dy: Tensor, dx: Tensor, params: Pool2dParams): void {
  const what = 'avgPool.backward';
  const g = normalizePool2d(dx.shape, params, what);
  checkShape(dy, [g.n, g.c, g.oh, g.ow], 'f32', what, 'dy');
  run(gpu, 'avgBackward', g, [null, dx, null, null, dy], what);
}

// x [N, C, H, W] -> y [N, C] (or [N, C, 1, 1]): mean over each plane
export function globalAvgPoolForward(gpu: Gpu, x: Tensor, y: Tensor): void {
  avgPoolForward(gpu, x, y, globalPoolParams(x.shape));
}

// dy [N, C] -> dx [N, C, H, W] = dy / (H*W) (written, not added)
export function globalAvgPoolBackward(gpu: Gpu, dy: Tensor, dx: Tensor): void {
  avgPoolBackward(gpu, dy, dx, globalPoolParams(dx.shape));
}
