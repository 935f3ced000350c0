// Records the update kernels of shaders/lars.wgsl over one binding window of the flat buffers
// (the optimiser's "ops"; optimizer.ts owns the buffers and calls these once per window per
// step).
//   larsUpdate: w, v updated in place from g and the per-segment squared norms
//   sgdUpdate:  w, v updated in place from g
// w, g, v: f32 [size] views of the same window of W, G, V; rows: u32 [R, ROW_U32] from
// buildUpdateTable (all windows); norms (lars): f32 with ||w||^2 at [0, S) and ||g||^2 (of G,
// unscaled) at [gsqBase, gsqBase + S), indexed by segment.
import code from '../../shaders/lars.wgsl?raw';
import { check, VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { ROW_U32, UPDATE_ITEMS, UPDATE_WG, type UpdateWindow } from './table.ts';

const KERNEL: Kernel = { name: 'lars', code };
const CONSTANTS = { WG: UPDATE_WG, ITEMS: UPDATE_ITEMS };

export interface UpdateBuffers {
  /** Views of the window [base, base + size) of W, G and V. */
  w: Tensor;
  g: Tensor;
  v: Tensor;
  /** u32 [R, ROW_U32]: the uploaded UpdateTable.rows. */
  table: Tensor;
  window: UpdateWindow;
}

export interface UpdateScalars {
  lr: number;
  momentum: number;
  weightDecay: number;
  gradScale: number;
}

function checkBuffers(gpu: Gpu, what: string, b: UpdateBuffers): void {
  const n = b.window.size;
  check([b.w, b.g, b.v].every((t) => t.dtype === 'f32' && t.size === n), what, () => `w, g, v must be f32 [${n}] (the window), `
    + `got w ${b.w.dtype} ${shapeStr(b.w.shape)}, g ${b.g.dtype} ${shapeStr(b.g.shape)}, v ${b.v.dtype} ${shapeStr(b.v.shape)}`);
  check(b.table.dtype === 'u32' && b.table.shape.length === 2 && b.table.shape[1] === ROW_U32 && b.window.firstRow + b.window.rows <= b.table.shape[0]!,
    what, () => `table must be u32 [R >= ${b.window.firstRow + b.window.rows}, ${ROW_U32}], got ${b.table.dtype} ${shapeStr(b.table.shape)}`);
  // WebGPU forbids binding one range both read_write and read.
  check(b.w.buffer !== b.g.buffer && b.w.buffer !== b.v.buffer && b.g.buffer !== b.v.buffer, what, () => 'w, g and v must be three different buffers');
  if (n * 4 > gpu.maxBindingBytes) {
    throw new VtError('too-large', `${what}: a window of ${n} floats exceeds one storage binding (${gpu.maxBindingBytes} bytes): `
      + 'the tables were planned for a larger limit; create the optimizer under the limit it runs with.');
  }
}

function uniforms(b: UpdateBuffers, gsqBase: number, nesterov: boolean, k: UpdateScalars, eta: number): Scalar[] {
  return [
    ['u32', b.window.rows], ['u32', b.window.chunks], ['u32', gsqBase], ['u32', nesterov ? 1 : 0],
    ['f32', k.lr], ['f32', k.momentum], ['f32', k.weightDecay], ['f32', eta], ['f32', k.gradScale],
    ['u32', b.window.firstRow],
  ];
}

/** norms holds S = `segments` results per input (see the header). */
export function larsUpdate(gpu: Gpu, b: UpdateBuffers, norms: Tensor, segments: number, gsqBase: number, k: UpdateScalars, eta: number): void {
  checkBuffers(gpu, 'larsUpdate', b);
  check(norms.dtype === 'f32' && gsqBase >= segments && norms.size >= gsqBase + segments, 'larsUpdate',
    () => `norms must be f32 holding [0, ${segments}) and [${gsqBase}, ${gsqBase + segments}), got ${norms.size} floats`);
  if (b.window.rows === 0 || b.window.chunks === 0) return;
  gpu.dispatch1d({
    kernel: { ...KERNEL, entryPoint: 'lars' }, constants: CONSTANTS, uniforms: uniforms(b, gsqBase, false, k, eta), bindings: [b.table, b.w, b.g, b.v, norms],
  }, b.window.chunks);
}

export function sgdUpdate(gpu: Gpu, b: UpdateBuffers, k: UpdateScalars, nesterov: boolean): void {
  checkBuffers(gpu, 'sgdUpdate', b);
  if (b.window.rows === 0 || b.window.chunks === 0) return;
  gpu.dispatch1d({
    kernel: { ...KERNEL, entryPoint: 'sgd' }, constants: CONSTANTS, uniforms: uniforms(b, 0, nesterov, k, 0), bindings: [b.table, b.w, b.g, b.v, null],
  }, b.window.chunks);
}
