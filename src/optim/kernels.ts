// Records the update kernels of shaders/lars.wgsl over the flat buffers (the optimiser's
// "ops"; optimizer.ts owns the buffers and calls these once per step).
//   larsUpdate: w, v updated in place from g and the per-segment squared norms
//   sgdUpdate:  w, v updated in place from g
// w, g, v: f32 [n], same layout; table: u32 [S, 4] from buildUpdateTable;
// norms (lars): f32 with ||w||^2 at [0, S) and ||g||^2 (of G, unscaled) at [gsqBase, gsqBase + S).
import code from '../../shaders/lars.wgsl?raw';
import { check, VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { UPDATE_ITEMS, UPDATE_WG } from './table.ts';

const KERNEL: Kernel = { name: 'lars', code };
const CONSTANTS = { WG: UPDATE_WG, ITEMS: UPDATE_ITEMS };

export interface UpdateBuffers {
  w: Tensor;
  g: Tensor;
  v: Tensor;
  /** u32 [S, 4]: the uploaded UpdateTable.rows. */
  table: Tensor;
  /** UpdateTable.chunks. */
  chunks: number;
}

export interface UpdateScalars {
  lr: number;
  momentum: number;
  weightDecay: number;
  gradScale: number;
}

function checkBuffers(gpu: Gpu, what: string, b: UpdateBuffers): number {
  const n = b.w.size;
  check([b.w, b.g, b.v].every((t) => t.dtype === 'f32' && t.size === n), what, () => `w, g, v must be f32 of one size, got w ${b.w.dtype} ${shapeStr(b.w.shape)}, g ${b.g.dtype} ${shapeStr(b.g.shape)}, v ${b.v.dtype} ${shapeStr(b.v.shape)}`);
  check(b.table.dtype === 'u32' && b.table.shape.length === 2 && b.table.shape[1] === 4, what, () => `table must be u32 [S, 4], got ${b.table.dtype} ${shapeStr(b.table.shape)}`);
  // WebGPU forbids binding one range both read_write and read.
  check(b.w.buffer !== b.g.buffer && b.w.buffer !== b.v.buffer && b.g.buffer !== b.v.buffer, what, () => 'w, g and v must be three different buffers');
  if (n * 4 > gpu.maxBindingBytes) {
    throw new VtError('too-large', `${what}: a flat buffer of ${n} floats exceeds one storage binding (${gpu.maxBindingBytes} bytes): split the model's parameters into several flat buffers.`);
  }
  return b.table.shape[0]!;
}

function uniforms(S: number, chunks: number, gsqBase: number, nesterov: boolean, k: UpdateScalars, eta: number): Scalar[] {
  return [
    ['u32', S], ['u32', chunks], ['u32', gsqBase], ['u32', nesterov ? 1 : 0],
    ['f32', k.lr], ['f32', k.momentum], ['f32', k.weightDecay], ['f32', eta], ['f32', k.gradScale],
  ];
}

export function larsUpdate(gpu: Gpu, b: UpdateBuffers, norms: Tensor, gsqBase: number, k: UpdateScalars, eta: number): void {
  const S = checkBuffers(gpu, 'larsUpdate', b);
  check(norms.dtype === 'f32' && gsqBase >= S && norms.size >= gsqBase + S, 'larsUpdate', () => `norms must be f32 holding [0, ${S}) and [${gsqBase}, ${gsqBase + S}), got ${norms.size} floats`);
  if (S === 0 || b.chunks === 0) return;
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint: 'lars' }, constants: CONSTANTS, uniforms: uniforms(S, b.chunks, gsqBase, false, k, eta), bindings: [b.table, b.w, b.g, b.v, norms] }, b.chunks);
}

export function sgdUpdate(gpu: Gpu, b: UpdateBuffers, k: UpdateScalars, nesterov: boolean): void {
  const S = checkBuffers(gpu, 'sgdUpdate', b);
  if (S === 0 || b.chunks === 0) return;
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint: 'sgd' }, constants: CONSTANTS, uniforms: uniforms(S, b.chunks, 0, nesterov, k, 0), bindings: [b.table, b.w, b.g, b.v, null] }, b.chunks);
}
