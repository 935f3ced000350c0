// Deterministic reductions: sum and sum of squares of a whole tensor, and per-segment sums of
// squares of flat buffers for LARS (each parameter tensor is a segment [offset, length] of the
// one flat parameter buffer; the same table serves the flat gradient buffer). f32 throughout,
// but tree-shaped (see shaders/reduce.wgsl), in two passes, never with atomics: the same
// inputs give the same bits on every run. Flat buffers larger than one storage binding (AlexNet:
// 244 MB against llvmpipe's 128 MiB) are read through windows of whole segments; a segment
// larger than a binding is split on chunk boundaries, so its sum does not depend on the limit.
import code from '../../shaders/reduce.wgsl?raw';
import { check, VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { type BindingWindow, type Segment, SPLIT_UNIT, bindingWindows } from '../shapes/reduce.ts';
import { bindingRanges } from './elementwise.ts';

// The segment planning (bindingWindows) lives in src/shapes/reduce.ts; re-exported for the ops namespace.
export type { BindingWindow, Piece, Segment } from '../shapes/reduce.ts';
export { SPLIT_UNIT, bindingWindows } from '../shapes/reduce.ts';

const KERNEL: Kernel = { name: 'reduce', code };
const WG = 256;
/** Elements per pass-1 workgroup (the shader's CH): SPLIT_UNIT, so split segments sum in the same chunks. */
const CH = SPLIT_UNIT;
const ITEMS = CH / WG;
const CONSTANTS = { WG, ITEMS };

/** Largest binding in floats, a multiple of the view alignment. */
export function maxBindingElems(gpu: Gpu): number {
  const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
  return Math.floor(gpu.maxBindingBytes / 4 / align) * align;
}

/** What sumSquaresSegments needs per layout: built and uploaded once by segmentTable. */
export interface SegmentTable {
  /** Floats in each input. */
  readonly n: number;
  /** Segments (one result each). */
  readonly count: number;
  readonly windows: readonly BindingWindow[];
  /** u32 [P, 4] per piece (all windows): offset in its window, length, first partial, 0. */
  readonly pieces: Tensor;
  /** u32 [S, 4] per segment: first partial, partial count, 1 if inside x (else 0: NaN), 0. */
  readonly finish: Tensor;
  /** Per window: index of its first piece and of its first partial, and its partials. */
  readonly dispatches: readonly { firstPiece: number; pbase: number; partials: number }[];
  /** Total partials (chunks of CH floats) over all segments. */
  readonly partials: number;
}

/**
 * Plans and uploads the segment tables for inputs of n floats (once per model layout;
 * uploading flushes recorded work). Uses gpu.maxBindingBytes as it is now: build the table
 * under the limit it will run with. Free it with releaseSegmentTable.
 */
export function segmentTable(gpu: Gpu, segs: readonly Segment[], n: number): SegmentTable {
  const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
  const windows = bindingWindows(segs, n, maxBindingElems(gpu), align);
  const pieceCount = windows.reduce((a, w) => a + w.pieces.length, 0);
  const pieces = new Uint32Array(Math.max(1, pieceCount) * 4);
  const finish = new Uint32Array(Math.max(1, segs.length) * 4);
  const dispatches: { firstPiece: number; pbase: number; partials: number }[] = [];
  let p = 0, partials = 0;
  // A split segment's pieces come one after another, so its partials are consecutive and
  // are summed in the same order as if it had not been split.
  for (const w of windows) {
    const d = { firstPiece: p, pbase: partials, partials: 0 };
    for (const pc of w.pieces) {
      const chunks = Math.ceil(pc.length / CH);
      pieces.set([pc.offset - w.base, pc.length, partials, 0], 4 * p++);
      // The segment's first piece starts its partials range and marks it inside x.
      if (finish[4 * pc.segment + 2] === 0) finish.set([partials, 0, 1], 4 * pc.segment);
      finish[4 * pc.segment + 1]! += chunks;
      partials += chunks;
      d.partials += chunks;
    }
    dispatches.push(d);
  }
  // Empty segments inside x sum to 0 (no partials); segments outside x give NaN.
  segs.forEach(([off, len], s) => {
    if (len === 0 && off >= 0 && off <= n) finish[4 * s + 2] = 1;
  });
  return {
    n,
    count: segs.length,
    windows,
    pieces: gpu.upload(pieces, [Math.max(1, pieceCount), 4], 'segments.pieces'),
    finish: gpu.upload(finish, [Math.max(1, segs.length), 4], 'segments.finish'),
    dispatches,
    partials,
  };
}

export function releaseSegmentTable(gpu: Gpu, t: SegmentTable): void {
  gpu.release(t.pieces, t.finish);
}

function params(n: number, s: number, cap: number, sq: boolean, pbase = 0, first = 0): Scalar[] {
  return [['u32', n], ['u32', s], ['u32', cap], ['u32', sq ? 1 : 0], ['u32', pbase], ['u32', first]];
}

function dispatch(gpu: Gpu, entryPoint: string, uniforms: Scalar[], bindings: (Tensor | null)[], workgroups: number): void {
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint }, constants: CONSTANTS, uniforms, bindings }, workgroups);
}

// table (from segmentTable over n floats), xs[i] f32 [n] -> outs[i] f32 [S]:
//   outs[i][s] = sum over j in [offset_s, offset_s + length_s) of xs[i][j]^2
// LARS passes [weights, grads] -> [||w||^2, ||g||^2] per tensor in one call, no readback.
// Per input: one partials dispatch per binding window (a view of x), then one dispatch
// summing each segment's partials. An empty segment gives 0, one outside x gives NaN.
export function sumSquaresSegments(gpu: Gpu, table: SegmentTable, xs: readonly Tensor[], outs: readonly Tensor[]): void {
  const what = 'sumSquaresSegments';
  const S = table.count;
  check(xs.length >= 1 && xs.length === outs.length, what, () => `${xs.length} inputs and ${outs.length} outputs (need one output per input)`);
  check(xs.every((x) => x.size === table.n && x.dtype === 'f32'), what,
    () => `inputs must be f32 [${table.n}] (the table's size): ${xs.map((x) => `${x.dtype} ${shapeStr(x.shape)}`).join(', ')}`);
  check(outs.every((o) => o.size === S && o.dtype === 'f32'), what,
    () => `each output must be f32 [${S}], got ${outs.map((o) => `${o.dtype} ${shapeStr(o.shape)}`).join(', ')}`);
  const widest = Math.max(0, ...table.windows.map((w) => w.size));
  if (widest * 4 > gpu.maxBindingBytes) {
    throw new VtError('too-large', `${what}: the table was planned for bindings of ${widest} floats but the limit is now ${gpu.maxBindingBytes} bytes: `
      + 'build it again with segmentTable.');
  }
  if (S === 0) return;
  const partials = gpu.empty([Math.max(1, table.partials)], 'f32', 'reduce.partials');
  // One partials buffer serves every input: dispatches run in order.
  xs.forEach((x, i) => {
    table.windows.forEach((w, k) => {
      const d = table.dispatches[k]!;
      dispatch(gpu, 'segPartials', params(w.size, w.pieces.length, d.partials, true, d.pbase, d.firstPiece),
        [table.pieces, gpu.view(x, w.base, [w.size]), partials], d.partials);
    });
    dispatch(gpu, 'segFinish', params(0, S, 0, true), [table.finish, null, partials, outs[i]!], S);
  });
  gpu.release(partials);
}

function wholeSum(gpu: Gpu, what: string, x: Tensor, out: Tensor, sq: boolean): void {
  check(x.dtype === 'f32' && out.size === 1, what, () => `needs f32 x and a [1] output, got ${x.dtype} x, out ${shapeStr(out.shape)}`);
  const ranges = bindingRanges(gpu, x.size);
  const total = ranges.reduce((a, [, n]) => a + Math.ceil(n / CH), 0);
  const partials = gpu.empty([Math.max(1, total)], 'f32', 'reduce.partials');
  let pbase = 0;
  for (const [s, n] of ranges) {
    const chunks = Math.ceil(n / CH);
    dispatch(gpu, 'wholePartials', params(n, 0, 0, sq, pbase), [null, gpu.view(x, s, [n]), partials], chunks);
    pbase += chunks;
  }
  dispatch(gpu, 'wholeFinish', params(0, total, 0, sq), [null, null, partials, out], 1);
  gpu.release(partials);
}

// x f32 [any] -> out [1] = sum of x
export function sum(gpu: Gpu, x: Tensor, out: Tensor): void {
  wholeSum(gpu, 'sum', x, out, false);
}

// x f32 [any] -> out [1] = sum of x^2
export function sumSquares(gpu: Gpu, x: Tensor, out: Tensor): void {
  wholeSum(gpu, 'sumSquares', x, out, true);
}
