// Pure helpers on shapes shared by every engine: element count, printing, reshape, and the
// structural type the shape rules read (any engine's tensor has it). No WebGPU here.
import { VtError } from '../errors.ts';

/** What the shape rules read of a tensor: any engine's tensor (and src/backend's TensorLike) fits. */
export interface Shaped {
  readonly shape: readonly number[];
  /** Number of elements (product of shape). */
  readonly size: number;
  readonly dtype: string;
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
