// A tensor is a typed view into a GPU buffer: (buffer, byte offset, shape). Parameters and
// gradients of a whole model live in one flat buffer each; layers get views at offsets.
// The pure shape helpers live in src/shapes/shape.ts (the wasm engine and the model use them too).
export { reshape, shapeStr, sizeOf } from '../shapes/shape.ts';

export type DType = 'f32' | 'i32' | 'u32';

export interface Tensor {
  readonly buffer: GPUBuffer;
  /** Byte offset into `buffer`; a multiple of the device's minStorageBufferOffsetAlignment. */
  readonly offset: number;
  readonly shape: readonly number[];
  /** Number of elements (product of shape). */
  readonly size: number;
  readonly dtype: DType;
}

/** The binding resource for a tensor (whole view). */
export function binding(t: Tensor): GPUBufferBinding {
  return { buffer: t.buffer, offset: t.offset, size: Math.max(4, t.size * 4) };
}
