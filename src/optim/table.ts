// The per-layout tables the update kernels read, built once on the CPU: checks that the
// segments are disjoint and inside the buffers, groups them into binding windows (the same
// windows as the norms' segmentTable, src/ops/reduce.ts), then lays out one row per piece
// (offset in its window, length, flags, firstChunk, segment) for shaders/lars.wgsl and
// (offset, length) pairs for the norms.
import { bindingWindows, type Segment } from '../shapes/reduce.ts';
import { OptimError } from './errors.ts';
import type { ParamSegment } from './types.ts';

/** Elements per update workgroup: the shader's CH = WG * ITEMS. */
export const UPDATE_WG = 256;
export const UPDATE_ITEMS = 4;
export const UPDATE_CHUNK = UPDATE_WG * UPDATE_ITEMS;

export const FLAG_ADAPT = 1;
export const FLAG_DECAY = 2;

/** u32 per update row: offset in the window, length, flags, firstChunk, segment. */
export const ROW_U32 = 5;

/** One update dispatch: a view [base, base + size) of W, G, V and rows [firstRow, +rows). */
export interface UpdateWindow {
  base: number;
  size: number;
  firstRow: number;
  rows: number;
  /** Workgroups this window's dispatch needs (sum of ceil(length / UPDATE_CHUNK)). */
  chunks: number;
}

export interface UpdateTable {
  /** u32 [R, ROW_U32], one row per piece of a segment, windows one after another. */
  rows: Uint32Array;
  windows: UpdateWindow[];
  /** (offset, length) pairs for sumSquaresSegments (segmentTable), one per segment. */
  norms: Segment[];
}

/** The binding geometry the windows are planned for (see maxBindingElems in reduce.ts). */
export interface BindingLimits {
  /** Largest binding in floats. */
  maxElems: number;
  /** View offset alignment in floats. */
  align: number;
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

/**
 * Throws 'bad-layout' unless every trustFrom names another segment of the list that LARS
 * adapts, and only on a segment not adapted itself.
 */
export function checkTrustFrom(segs: readonly ParamSegment[]): void {
  segs.forEach((s, i) => {
    if (s.trustFrom === undefined) return;
    const from = segs[s.trustFrom];
    if (!Number.isInteger(s.trustFrom) || from === undefined || s.trustFrom === i) {
      throw new OptimError('bad-layout', `segment '${s.name}' takes its trust ratio from segment ${s.trustFrom}, `
        + `which is not another of the ${segs.length} segments`);
    }
    if (s.adapt) throw new OptimError('bad-layout', `segment '${s.name}' is adapted itself and also names trustFrom '${from.name}': give one or the other`);
    if (!from.adapt) throw new OptimError('bad-layout', `segment '${s.name}' takes its trust ratio from '${from.name}', which LARS does not adapt`);
  });
}

export function buildUpdateTable(segs: readonly ParamSegment[], n: number, limits: BindingLimits): UpdateTable {
  checkSegments(segs, n);
  const norms = segs.map((s): Segment => [s.offset, s.length]);
  const planned = bindingWindows(norms, n, limits.maxElems, limits.align);
  const rows = new Uint32Array(planned.reduce((a, w) => a + w.pieces.length, 0) * ROW_U32);
  const windows: UpdateWindow[] = [];
  let r = 0;
  for (const w of planned) {
    const win: UpdateWindow = { base: w.base, size: w.size, firstRow: r, rows: w.pieces.length, chunks: 0 };
    for (const p of w.pieces) {
      const s = segs[p.segment]!;
      rows.set([p.offset - w.base, p.length, (s.adapt ? FLAG_ADAPT : 0) | (s.decay ? FLAG_DECAY : 0), win.chunks, p.segment], r++ * ROW_U32);
      win.chunks += Math.ceil(p.length / UPDATE_CHUNK);
    }
    windows.push(win);
  }
  return { rows, windows, norms };
}
