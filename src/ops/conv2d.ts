// 2-D convolution, NCHW, weights [Cout, Cin, KH, KW], no bias (a separate op adds it), no groups.
//
// Algorithm: IMPLICIT GEMM, in two variants. Why not im2col + GEMM: the im2col buffer costs
// Cin*KH*KW*OH*OW*N floats (AlexNet conv1 at batch 128: 363*55*55*128*4 B = 560 MB, over every
// binding limit), plus a write and a read of it. Implicit GEMM computes the same products by
// indexing the input directly.
//  - 'blocked' (shaders/conv2d_{fwd,bwd_input,bwd_filter}.wgsl), for CPU drivers (llvmpipe,
//    SwiftShader): each invocation owns BM channels x 4 positions in registers, no workgroup
//    memory; there it is 2-3x faster than workgroup tiling (RECIPES.md) and beat TF.js's WebGPU
//    backend 1.7-12x on the ResNet/AlexNet layers (see the report with this file).
//  - 'tiled' (shaders/conv2d.wgsl), for real GPUs: 64x64 output tiles staged through
//    workgroup memory, what GPUs want; tested here for correctness only (no GPU on CI).
//  Which one: gpu.tuning entry 'conv2d_tiled' forces tiled (its values are the tile constants),
//  any entry for a blocked kernel forces blocked, else tiled exactly when !gpu.info.software.
//  Block, tile and workgroup sizes are override constants, never part of the WGSL text.
// The three GEMMs:
//   forward:         M = Cout, N = batch*OH*OW, K = Cin*KH*KW
//   backward input:  M = Cin,  N = batch*H*W,   K = Cout*KH*KW/(sh*sw): split into sh*sw
//                    phases (input positions with the same (y+ph) mod sh, (x+pw) mod sw), so
//                    each dx element gathers exactly the dy positions that touched it.
//   backward filter: M = Cout, N = Cin*KH*KW,   K = batch*OH*OW (the long reduction).
// No atomics, fixed summation order: identical inputs give bitwise identical outputs.
// Tensors larger than one storage binding are processed in batch chunks (conv2dBatchChunks), and
// no invocation loops more than llvmpipe allows (see LOOP_BUDGET). The shape rules (params,
// geometry, output shape, batch chunks) are pure and live in src/shapes/conv2d.ts.
import bwdFilterCode from '../../shaders/conv2d_bwd_filter.wgsl?raw';
import bwdInputCode from '../../shaders/conv2d_bwd_input.wgsl?raw';
import fwdCode from '../../shaders/conv2d_fwd.wgsl?raw';
import tiledCode from '../../shaders/conv2d.wgsl?raw';
import { VtError, check } from '../errors.ts';
import type { Constants, Gpu, Kernel } from '../gpu/runtime.ts';
import { type Tensor, shapeStr } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { type Conv2dBackwardOptions, type Conv2dGeometry, type Conv2dParams, conv2dBatchChunks, normalizeConv2d } from '../shapes/conv2d.ts';

// Re-exported for the ops namespace.
export type { Conv2dBackwardOptions, Conv2dBindingLimits, Conv2dGeometry, Conv2dParams } from '../shapes/conv2d.ts';
export { conv2dBatchChunks, conv2dShape, normalizeConv2d } from '../shapes/conv2d.ts';

const KERNELS = {
  fwd: { name: 'conv2d_fwd', code: fwdCode, entryPoint: 'main' },
  bwdInput: { name: 'conv2d_bwd_input', code: bwdInputCode, entryPoint: 'main' },
  bwdFilter: { name: 'conv2d_bwd_filter', code: bwdFilterCode, entryPoint: 'main' },
  reduce: { name: 'conv2d_bwd_filter', code: bwdFilterCode, entryPoint: 'reduce' },
  tiled: { name: 'conv2d_tiled', code: tiledCode, entryPoint: 'main' },
} satisfies Record<string, Kernel>;

type Pass = 'fwd' | 'bwdInput' | 'bwdFilter';
const MODE: Record<Pass, number> = { fwd: 0, bwdInput: 1, bwdFilter: 2 };

/** Tiled when asked for by gpu.tuning, or by default on hardware GPUs (see the header). */
function useTiled(gpu: Gpu): boolean {
  if (gpu.tuning.has(KERNELS.tiled.name)) return true;
  if ([KERNELS.fwd, KERNELS.bwdInput, KERNELS.bwdFilter].some((k) => gpu.tuning.has(k.name))) return false;
  return !gpu.info.software;
}

/** One pass's GEMM launch: blocks of m rows by n columns, `invocations` per workgroup. */
interface Launch { kernel: Kernel; c: Constants; mBlocks: number; nBlocks: number; perWorkgroup: number }

/**
 * The launch for a GEMM of m rows (channels) by n columns. Blocked: gpu.tuning's constants for
 * the kernel if set, else WG = 64 and BM from m: on CPU drivers bigger register blocks were
 * faster all the way to 32 (resnet 3x3 64->64: 2.4-4.4 GFLOP/s at BM = 8, 4.1-5.7 at 32), and a
 * block no larger than m wastes nothing on few channels (3 -> BM = 4). Tiled: 16x16 threads,
 * each a 4x4 block of a 64x64 tile, BK = 16.
 */
function launch(gpu: Gpu, pass: Pass, m: number, n: number): Launch {
  if (useTiled(gpu)) {
    const c: Constants = { WGX: 16, WGY: 16, BK: 16, ...gpu.tuning.get(KERNELS.tiled.name), MODE: MODE[pass] };
    return { kernel: KERNELS.tiled, c, mBlocks: Math.ceil(m / (4 * c.WGY!)), nBlocks: Math.ceil(n / (4 * c.WGX!)), perWorkgroup: 1 };
  }
  const kernel = KERNELS[pass];
  const auto = [4, 8, 16].find((b) => m <= b) ?? 32;
  const c: Constants = { WG: 64, BM: auto, ...gpu.tuning.get(kernel.name) };
  return { kernel, c, mBlocks: Math.ceil(m / c.BM!), nBlocks: Math.ceil(n / 4), perWorkgroup: c.WG! };
}

/** Per-dispatch parameters after the geometry; what a pass does not use stays 0. */
interface Extra { splits?: number; rowsPerSplit?: number; beta?: number; phase?: readonly number[] }

/** Records the launch for `batch` samples, `splits` times over (split-K of the filter gradient). */
function dispatch(gpu: Gpu, l: Launch, g: Conv2dGeometry, batch: number, e: Extra, bindings: (Tensor | null)[]): void {
  const splits = e.splits ?? 1;
  // The Params struct all conv shaders share, in WGSL declaration order.
  const u32 = (v: number): Scalar => ['u32', v];
  const uniforms: Scalar[] = [
    ...[batch, g.cin, g.h, g.w, g.cout, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, l.mBlocks, l.nBlocks, splits, e.rowsPerSplit ?? 0].map(u32),
    ['f32', e.beta ?? 0],
    ...(e.phase ?? new Array<number>(10).fill(0)).map(u32),
  ];
  gpu.dispatch1d({ kernel: l.kernel, constants: l.c, uniforms, bindings }, Math.ceil((l.mBlocks * l.nBlocks * splits) / l.perWorkgroup));
}

/**
 * llvmpipe ends every shader invocation's loops after 65535 iterations in total (Mesa's
 * LP_MAX_TGSI_LOOP_ITERATIONS), silently: a longer reduction would return a partial sum. Each
 * invocation is kept under this budget; the filter gradient splits its long reduction to fit.
 */
const LOOP_BUDGET = 32768;

function checkLoops(iterations: number, what: string, detail: string): void {
  if (iterations > LOOP_BUDGET) {
    throw new VtError('too-large', `${what}: ${detail} needs ${iterations} loop iterations per GPU invocation, `
      + `more than the ${LOOP_BUDGET} some drivers (llvmpipe) allow: use fewer channels.`);
  }
}

function checkShape(t: Tensor, shape: readonly number[], what: string, name: string): void {
  check(t.shape.length === shape.length && t.shape.every((d, i) => d === shape[i]), what, () => `${name} must be ${shapeStr(shape)}, got ${shapeStr(t.shape)}`);
}

/** View of samples [s, s + c) of an [N, ...] tensor. */
function samples(gpu: Gpu, t: Tensor, s: number, c: number): Tensor {
  const per = t.size / t.shape[0]!;
  return s === 0 && c === t.shape[0] ? t : gpu.view(t, s * per, [c, ...t.shape.slice(1)]);
}

// x [N, Cin, H, W], w [Cout, Cin, KH, KW] -> out [N, Cout, OH, OW]
/** out = conv2d(x, w). `out` must not alias x or w. */
export function conv2dForward(gpu: Gpu, x: Tensor, w: Tensor, out: Tensor, params: Conv2dParams): void {
  const what = 'conv2d.forward';
  const g = normalizeConv2d(x.shape, w.shape, params, what);
  checkShape(out, [g.n, g.cout, g.oh, g.ow], what, 'out');
  checkLoops(g.kh * (1 + g.kw * (1 + g.cin)), what, `Cin ${g.cin} x ${g.kh}x${g.kw}`);
  for (const [s, cnt] of conv2dBatchChunks(gpu.limits, g, what)) {
    dispatch(gpu, launch(gpu, 'fwd', g.cout, cnt * g.oh * g.ow), g, cnt, {}, [w, samples(gpu, x, s, cnt), samples(gpu, out, s, cnt)]);
  }
}

/** One phase of the input-gradient gather: input rows y = first + s*a (a < count), taps ky = tap0 + s*t (t < taps), dy row = dyOffset + a - t. */
interface Phase { first: number; count: number; tap0: number; taps: number; dyOffset: number }

/** Phases along one axis: size, kernel extent, stride, pad. Skips residues with no input positions. */
function axisPhases(size: number, k: number, s: number, pad: number): Phase[] {
  const out: Phase[] = [];
  for (let r = 0; r < s; r++) {
    const first = (((r - pad) % s) + s) % s;
    if (first >= size) continue;
    out.push({ first, count: Math.ceil((size - first) / s), tap0: r, taps: r < k ? Math.ceil((k - r) / s) : 0, dyOffset: (first + pad - r) / s });
  }
  return out;
}

// dy [N, Cout, OH, OW], w [Cout, Cin, KH, KW] -> dx [N, Cin, H, W]
/** dx = dL/dx given dy = dL/dout (dx += ... with accumulate). One dispatch per stride phase (sh*sw). */
export function conv2dBackwardInput(gpu: Gpu, dy: Tensor, w: Tensor, dx: Tensor, params: Conv2dParams, opts: Conv2dBackwardOptions = {}): void {
  const what = 'conv2d.backwardInput';
  const g = normalizeConv2d(dx.shape, w.shape, params, what);
  checkShape(dy, [g.n, g.cout, g.oh, g.ow], what, 'dy');
  const taps = (k: number, s: number): number => Math.ceil(k / s);
  checkLoops(taps(g.kh, g.sh) * (1 + taps(g.kw, g.sw) * (1 + g.cout)), what, `Cout ${g.cout} x ${g.kh}x${g.kw}`);
  for (const [s, cnt] of conv2dBatchChunks(gpu.limits, g, what)) {
    for (const py of axisPhases(g.h, g.kh, g.sh, g.ph)) {
      for (const px of axisPhases(g.w, g.kw, g.sw, g.pw)) {
        const phase = [py.first, px.first, py.count, px.count, py.tap0, px.tap0, py.taps, px.taps, py.dyOffset, px.dyOffset];
        dispatch(gpu, launch(gpu, 'bwdInput', g.cin, cnt * py.count * px.count), g, cnt, { phase, beta: opts.accumulate ? 1 : 0 },
          [w, samples(gpu, dy, s, cnt), samples(gpu, dx, s, cnt)]);
      }
    }
  }
}

// x [N, Cin, H, W], dy [N, Cout, OH, OW] -> dw [Cout, Cin, KH, KW]
/** dw = dL/dw given dy = dL/dout, summed over the batch (dw += ... with accumulate). */
export function conv2dBackwardFilter(gpu: Gpu, x: Tensor, dy: Tensor, dw: Tensor, params: Conv2dParams, opts: Conv2dBackwardOptions = {}): void {
  const what = 'conv2d.backwardFilter';
  const g = normalizeConv2d(x.shape, dw.shape, params, what);
  checkShape(dy, [g.n, g.cout, g.oh, g.ow], what, 'dy');
  checkLoops(g.ow + 2, what, `an output row of ${g.ow}`);
  const size = dw.size;
  const l = launch(gpu, 'bwdFilter', g.cout, g.cin * g.kh * g.kw);
  // Enough K ranges to fill the device: a few hundred invocations keep llvmpipe's threads and
  // SIMD lanes busy, a GPU wants thousands of invocations (hundreds of tiled workgroups).
  const target = l.perWorkgroup === 1 ? 256 : gpu.info.software ? 512 : 16384;
  // Each range within the loop budget (the tiled kernel spends ~1.75 iterations per k).
  const maxRows = Math.floor(LOOP_BUDGET / (l.perWorkgroup === 1 ? 2 : 1) / (g.ow + 1));
  // Batch chunks run one after another, each adding to the previous: still a fixed order.
  conv2dBatchChunks(gpu.limits, g, what).forEach(([s, cnt], i) => {
    const beta = opts.accumulate || i > 0 ? 1 : 0;
    const rows = cnt * g.oh;
    let rowsPerSplit = Math.min(maxRows, Math.ceil(rows / Math.ceil(target / (l.mBlocks * l.nBlocks))));
    // The partial sums must fit one binding: fewer, longer ranges if not (still within budget).
    const maxSplits = Math.floor(gpu.limits.maxStorageBufferBindingSize / 4 / size);
    rowsPerSplit = Math.max(rowsPerSplit, Math.ceil(rows / maxSplits));
    if (rowsPerSplit > maxRows) {
      throw new VtError('too-large', `${what}: ${Math.ceil(rows / maxRows)} partial filter gradients of ${size} floats do not fit one storage binding: `
        + 'use a smaller batch.');
    }
    const splits = Math.ceil(rows / rowsPerSplit);
    const ins = [samples(gpu, dy, s, cnt), samples(gpu, x, s, cnt)];
    if (splits === 1) {
      dispatch(gpu, l, g, cnt, { rowsPerSplit, beta }, [...ins, dw]);
      return;
    }
    const partial = gpu.empty([splits, size], 'f32', 'conv2d.dw.partial');
    dispatch(gpu, l, g, cnt, { splits, rowsPerSplit }, [...ins, partial]);
    // Then dw = the slices summed in order (+ beta * dw): one invocation per element.
    const reduce: Launch = { kernel: KERNELS.reduce, c: { WG: 64 }, mBlocks: 1, nBlocks: size, perWorkgroup: 64 };
    dispatch(gpu, reduce, g, cnt, { splits, beta }, [null, null, dw, partial]);
    // Safe: commands recorded so far run before any later reuse of the buffer.
    gpu.release(partial);
  });
}
