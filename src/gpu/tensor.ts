// A tensor is a typed view into a GPU buffer: (buffer, byte offset, shape). Parameters and
// gradients of a whole model live in one flat buffer each; layers get views at offsets.
import { VtError } from '../errors.ts';

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

export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new VtError('bad-shape', `shape [${shape.join(', ')}] has a dimension that is not a non-negative integer`);
    n *= d;
  }
  return n;
}

export function shapeStr(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/** Same data, another shape with the same number of elements (any engine's tensor). */
export function reshape<T extends { readonly shape: readonly number[]; readonly size: number }>(t: T, shape: readonly number[]): T {
  const size = sizeOf(shape);
  if (size !== t.size) throw new VtError('bad-shape', `reshape: cannot view ${shapeStr(t.shape)} (${t.size} elements) as ${shapeStr(shape)} (${size})`);
  return { ...t, shape: [...shape] };
}

/** The binding resource for a tensor (whole view). */
export function binding(t: Tensor): GPUBufferBinding {
  return { buffer: t.buffer, offset: t.offset, size: Math.max(4, t.size * 4) };
}
