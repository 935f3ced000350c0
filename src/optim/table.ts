// The per-layout tables the update kernels read, built once on the CPU: checks that the
// segments are disjoint and inside the buffers, then lays out (offset, length, flags,
// firstChunk) per segment for shaders/lars.wgsl and (offset, length) pairs for the norms.
import type { Segment } from '../ops/reduce.ts';
import { OptimError } from './errors.ts';
import type { ParamSegment } from './types.ts';

/** Elements per update workgroup: the shader's CH = WG * ITEMS. */
export const UPDATE_WG = 256;
export const UPDATE_ITEMS = 4;
export const UPDATE_CHUNK = UPDATE_WG * UPDATE_ITEMS;

export const FLAG_ADAPT = 1;
export const FLAG_DECAY = 2;

export interface UpdateTable {
  /** u32 [S, 4]: offset, length, flags, firstChunk. */
  rows: Uint32Array;
  /** Workgroups the update dispatches (sum of ceil(length / UPDATE_CHUNK)). */
  chunks: number;
  /** (offset, length) pairs for sumSquaresSegments. */
  norms: Segment[];
}

/** Throws 'bad-layout' unless the segments are well formed, disjoint and inside [0, n). */
export function checkSegments(segs: readonly ParamSegment[], n: number): void {
  const bad = (detail: string): OptimError => new OptimError('bad-layout', detail);
  if (!Number.isInteger(n) || n <= 0 || n >= 2 ** 32) throw bad(`the flat buffers must hold 1 to 2^32 - 1 floats, got ${n}`);
  for (const s of segs) {
    if (!Number.isInteger(s.offset) || !Number.isInteger(s.length) || s.offset < 0 || s.length < 0) {
      throw bad(`segment '${s.name}' has offset ${s.offset} and length ${s.length}: both must be integers >= 0`);
    }
    if (s.offset + s.length > n) throw bad(`segment '${s.name}' [${s.offset}, ${s.offset + s.length}) ends past the flat buffers' ${n} floats`);
  }
  const sorted = [...segs].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1]!, b = sorted[i]!;
    if (a.length > 0 && b.length > 0 && a.offset + a.length > b.offset) throw bad(`segments '${a.name}' and '${b.name}' overlap`);
  }
}

export function buildUpdateTable(segs: readonly ParamSegment[], n: number): UpdateTable {
  checkSegments(segs, n);
  const rows = new Uint32Array(segs.length * 4);
  let chunks = 0;
  segs.forEach((s, i) => {
    rows.set([s.offset, s.length, (s.adapt ? FLAG_ADAPT : 0) | (s.decay ? FLAG_DECAY : 0), chunks], i * 4);
    chunks += Math.ceil(s.length / UPDATE_CHUNK);
  });
  return { rows, chunks, norms: segs.map((s) => [s.offset, s.length] as const) };
}
