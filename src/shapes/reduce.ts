// Planning of the per-segment reductions over flat buffers (LARS norms, the update tables):
// segments, and the binding windows that group them so each window fits one storage binding.
// Pure: the WebGPU norms (src/ops/reduce.ts), the optimiser's tables and the float64 reference
// share it.
import { VtError } from '../errors.ts';

/**
 * Segments too large for one binding are split at multiples of this many floats: the norm
 * kernel's chunk (CH in src/ops/reduce.ts: 256 invocations x 16 elements per pass-1 workgroup).
 */
export const SPLIT_UNIT = 4096;

/** One parameter tensor inside a flat buffer: [element offset, element count]. */
export type Segment = readonly [offset: number, length: number];

/** A part of one segment that lies inside one binding window; offset is absolute. */
export interface Piece {
  segment: number;
  offset: number;
  length: number;
}

/**
 * A range [base, base + size) of the flat buffers small enough for one storage binding, and
 * the pieces of segments inside it (in offset order, none empty). base is aligned for views.
 */
export interface BindingWindow {
  base: number;
  size: number;
  pieces: Piece[];
}

/**
 * Groups the segments (in offset order) into windows of consecutive segments whose span fits
 * `maxElems` floats; each window starts at a multiple of `align` floats so it can be a view.
 * A segment that alone exceeds a binding is split into pieces at multiples of `SPLIT_UNIT`
 * floats from its start: that is the norm kernel's chunk, so its chunks (and therefore its
 * sum of squares) are the same whatever the binding limit. Empty segments and segments
 * outside [0, n) get no pieces. Pure: the optimiser calls it with the same arguments as
 * segmentTable and gets the same windows.
 */
export function bindingWindows(segs: readonly Segment[], n: number, maxElems: number, align: number): BindingWindow[] {
  const order = segs.map((_, i) => i).filter((i) => {
    const [off, len] = segs[i]!;
    return len > 0 && off >= 0 && off + len <= n;
  });
  order.sort((a, b) => segs[a]![0] - segs[b]![0] || a - b);
  const windows: BindingWindow[] = [];
  let cur: BindingWindow | null = null;
  for (const segment of order) {
    const [off, len] = segs[segment]!;
    const end = off + len;
    let start = off;
    while (start < end) {
      if (cur === null || end - cur.base > maxElems) {
        cur = { base: Math.floor(start / align) * align, size: 0, pieces: [] };
        windows.push(cur);
      }
      // Whole (rest of the) segment if it fits, else as many whole chunks as fit.
      const stop = end - cur.base <= maxElems ? end : start + Math.floor((cur.base + maxElems - start) / SPLIT_UNIT) * SPLIT_UNIT;
      if (stop === start) {
        throw new VtError('too-large', `a storage binding of ${maxElems} floats cannot hold one ${SPLIT_UNIT}-float chunk of a segment `
          + `at a ${align}-float aligned offset: the device (or test) binding limit is too small.`);
      }
      cur.pieces.push({ segment, offset: start, length: stop - start });
      cur.size = Math.max(cur.size, stop - cur.base);
      start = stop;
    }
  }
  return windows;
}
