// 2-D convolution, NCHW, weights [Cout, Cin, KH, KW], no bias (a separate op adds it), no groups.
//
// Algorithm: register-blocked IMPLICIT GEMM, one kernel per pass (shaders/conv2d_*.wgsl).
// Why not im2col + GEMM: the im2col buffer costs Cin*KH*KW*OH*OW*N floats (AlexNet conv1 at
// batch 128: 363*55*55*128*4 B = 560 MB, over every binding limit), plus a write and a read of
// it. Implicit GEMM computes the same products by indexing the input directly. Why register
// blocking (each invocation owns BM channels x 4 positions in registers, no workgroup memory):
// on the CPU drivers we test on it is 2-3x faster than workgroup tiling (RECIPES.md). Block and
// workgroup sizes are override constants, so gpu.tuning can pick others per adapter.
//   forward:         M = Cout, N = batch*OH*OW, K = Cin*KH*KW
//   backward input:  M = Cin,  N = batch*H*W,   K = Cout*KH*KW/(sh*sw): split into sh*sw
//                    phases (input positions with the same (y+ph) mod sh, (x+pw) mod sw), so
//                    each dx element gathers exactly the dy positions that touched it.
//   backward filter: M = Cout, N = Cin*KH*KW,   K = batch*OH*OW (the long reduction).
// No atomics, fixed summation order: identical inputs give bitwise identical outputs.
// Tensors larger than one storage binding are processed in batch chunks (see batchChunks).
import bwdFilterCode from '../../shaders/conv2d_bwd_filter.wgsl?raw';
import bwdInputCode from '../../shaders/conv2d_bwd_input.wgsl?raw';
import fwdCode from '../../shaders/conv2d_fwd.wgsl?raw';
import { VtError, check } from '../errors.ts';
import type { Constants, Gpu, Kernel } from '../gpu/runtime.ts';
import { type Tensor, shapeStr } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';

export interface Conv2dParams {
  /** Step between output positions: one number for both axes or [vertical, horizontal]. */
  stride: number | readonly [number, number];
  /** Zero padding on each side: one number or [top and bottom, left and right]. */
  pad: number | readonly [number, number];
}

/** Everything the kernels need, derived from the shapes and params. */
export interface Conv2dGeometry {
  n: number; cin: number; h: number; w: number;
  cout: number; kh: number; kw: number;
  oh: number; ow: number;
  sh: number; sw: number; ph: number; pw: number;
}

const pair = (v: number | readonly [number, number]): [number, number] => (typeof v === 'number' ? [v, v] : [v[0], v[1]]);

/** Validates shapes and params; throws a 'bad-shape' VtError that says what does not fit. */
export function normalizeConv2d(xShape: readonly number[], wShape: readonly number[], params: Conv2dParams, what = 'conv2d'): Conv2dGeometry {
  check(xShape.length === 4, what, () => `x must be [N, Cin, H, W], got ${shapeStr(xShape)}`);
  check(wShape.length === 4, what, () => `w must be [Cout, Cin, KH, KW], got ${shapeStr(wShape)}`);
  const [n, cin, h, w] = xShape as [number, number, number, number];
  const [cout, wcin, kh, kw] = wShape as [number, number, number, number];
  check(wcin === cin, what, () => `x has ${cin} channels but w ${shapeStr(wShape)} expects ${wcin}`);
  const [sh, sw] = pair(params.stride);
  const [ph, pw] = pair(params.pad);
  check([sh, sw].every((s) => Number.isInteger(s) && s >= 1), what, () => `stride must be integers >= 1, got ${String(params.stride)}`);
  check([ph, pw].every((s) => Number.isInteger(s) && s >= 0), what, () => `pad must be integers >= 0, got ${String(params.pad)}`);
  check([n, cin, h, w, cout, kh, kw].every((d) => Number.isInteger(d) && d >= 1), what, () => `empty or non-integer dimension in x ${shapeStr(xShape)} or w ${shapeStr(wShape)}`);
  check(h + 2 * ph >= kh && w + 2 * pw >= kw, what, () => `kernel ${kh}x${kw} is larger than the padded input ${h + 2 * ph}x${w + 2 * pw}`);
  const oh = Math.floor((h + 2 * ph - kh) / sh) + 1;
  const ow = Math.floor((w + 2 * pw - kw) / sw) + 1;
  return { n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw };
}

/** Output shape [N, Cout, OH, OW] with OH = floor((H + 2*ph - KH) / sh) + 1 (likewise OW). */
export function conv2dShape(xShape: readonly number[], wShape: readonly number[], params: Conv2dParams): number[] {
  const g = normalizeConv2d(xShape, wShape, params);
  return [g.n, g.cout, g.oh, g.ow];
}

/** Options of the backward passes. */
export interface Conv2dBackwardOptions {
  /** Add into the output (dw += ..., dx += ...) instead of overwriting it: sums micro-batches. */
  accumulate?: boolean;
}

const KERNELS = {
  fwd: { name: 'conv2d_fwd', code: fwdCode, entryPoint: 'main' },
  bwdInput: { name: 'conv2d_bwd_input', code: bwdInputCode, entryPoint: 'main' },
  bwdFilter: { name: 'conv2d_bwd_filter', code: bwdFilterCode, entryPoint: 'main' },
  bwdFilterReduce: { name: 'conv2d_bwd_filter', code: bwdFilterCode, entryPoint: 'reduce' },
} satisfies Record<string, Kernel>;

/** A GEMM-shaped launch: m rows (channels, BM per invocation) by `positions` columns (4 per invocation). */
interface Launch { k: keyof typeof KERNELS; c: Constants; mBlocks: number; nBlocks: number }

/**
 * Override constants are gpu.tuning's for the kernel if set, else WG = 64 and BM chosen from
 * m: on CPU drivers bigger register blocks were faster all the way to 32 (resnet 3x3 64->64:
 * 2.4-4.4 GFLOP/s at BM = 8, 4.1-5.7 at 32), and a block no larger than m wastes nothing on
 * few channels (3 -> BM = 4). Real GPUs want more invocations in flight and fewer registers
 * each: BM = 8 there.
 */
function launch(gpu: Gpu, k: keyof typeof KERNELS, m: number, positions: number): Launch {
  const auto = !gpu.info.software ? 8 : ([4, 8, 16].find((b) => m <= b) ?? 32);
  const c: Constants = { WG: 64, BM: auto, ...gpu.tuning.get(KERNELS[k].name) };
  return { k, c, mBlocks: Math.ceil(m / c.BM!), nBlocks: Math.ceil(positions / 4) };
}

/** Records the launch (`copies` times the blocks, for split-K) for `batch` samples. */
function dispatch(gpu: Gpu, l: Launch, g: Conv2dGeometry, batch: number, extra: Scalar[], bindings: (Tensor | null)[], copies = 1): void {
  // The Params struct every conv shader starts with, in WGSL declaration order.
  const geometry = [batch, g.cin, g.h, g.w, g.cout, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw].map((v): Scalar => ['u32', v]);
  gpu.dispatch1d(
    { kernel: KERNELS[l.k], constants: l.c, uniforms: [...geometry, ['u32', l.mBlocks], ['u32', l.nBlocks], ...extra], bindings },
    Math.ceil((l.mBlocks * l.nBlocks * copies) / l.c.WG!),
  );
}

/**
 * llvmpipe ends every shader invocation's loops after 65535 iterations in total (Mesa's
 * LP_MAX_TGSI_LOOP_ITERATIONS), silently: a longer reduction would return a partial sum. Each
 * invocation is kept under this budget; the filter gradient splits its long reduction to fit.
 */
const LOOP_BUDGET = 32768;

function checkLoops(iterations: number, what: string, detail: string): void {
  if (iterations > LOOP_BUDGET) {
    throw new VtError('too-large', `${what}: ${detail} needs ${iterations} loop iterations per GPU invocation, more than the ${LOOP_BUDGET} some drivers (llvmpipe) allow: use fewer channels.`);
  }
}

function checkShape(t: Tensor, shape: readonly number[], what: string, name: string): void {
  check(t.shape.length === shape.length && t.shape.every((d, i) => d === shape[i]), what, () => `${name} must be ${shapeStr(shape)}, got ${shapeStr(t.shape)}`);
}

/** The two device limits that decide how a batch is split (a GPUSupportedLimits fits). */
export interface BindingLimits { maxStorageBufferBindingSize: number; minStorageBufferOffsetAlignment: number }

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * Batch ranges [start, count] such that every per-sample tensor of a range fits one storage
 * binding and each range starts at an aligned byte offset. One range when everything fits.
 */
export function batchChunks(limits: BindingLimits, g: Conv2dGeometry, what: string): [number, number][] {
  const n = g.n;
  const perSample = [g.cin * g.h * g.w, g.cout * g.oh * g.ow];
  const maxBytes = limits.maxStorageBufferBindingSize;
  const wBytes = g.cout * g.cin * g.kh * g.kw * 4;
  if (wBytes > maxBytes) {
    throw new VtError('too-large', `${what}: the filter [${g.cout}, ${g.cin}, ${g.kh}, ${g.kw}] (${Math.ceil(wBytes / 2 ** 20)} MiB) exceeds this device's ${Math.floor(maxBytes / 2 ** 20)} MiB storage binding limit: use fewer channels.`);
  }
  const biggest = Math.max(...perSample) * 4;
  if (biggest * n <= maxBytes) return [[0, n]];
  const align = limits.minStorageBufferOffsetAlignment;
  // Smallest sample count whose byte size is a multiple of the alignment, for every tensor.
  let step = 1;
  for (const e of perSample) {
    const k = align / gcd((e * 4) % align || align, align);
    step = (step * k) / gcd(step, k);
  }
  const chunk = Math.floor(maxBytes / biggest / step) * step;
  if (chunk === 0) {
    throw new VtError('too-large', `${what}: ${Math.ceil(biggest / 2 ** 20)} MiB per sample (in steps of ${step} samples for ${align}-byte alignment) exceeds this device's ${Math.floor(maxBytes / 2 ** 20)} MiB storage binding limit: use a smaller image or batch.`);
  }
  const out: [number, number][] = [];
  for (let s = 0; s < n; s += chunk) out.push([s, Math.min(chunk, n - s)]);
  return out;
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
  for (const [s, cnt] of batchChunks(gpu.limits, g, what)) {
    dispatch(gpu, launch(gpu, 'fwd', g.cout, cnt * g.oh * g.ow), g, cnt, [], [samples(gpu, x, s, cnt), w, samples(gpu, out, s, cnt)]);
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
  for (const [s, cnt] of batchChunks(gpu.limits, g, what)) {
    for (const py of axisPhases(g.h, g.kh, g.sh, g.ph)) {
      for (const px of axisPhases(g.w, g.kw, g.sw, g.pw)) {
        const phase = [py.first, px.first, py.count, px.count, py.tap0, px.tap0, py.taps, px.taps, py.dyOffset, px.dyOffset];
        dispatch(gpu, launch(gpu, 'bwdInput', g.cin, cnt * py.count * px.count), g, cnt,
          [...phase.map((v): Scalar => ['u32', v]), ['f32', opts.accumulate ? 1 : 0]],
          [samples(gpu, dy, s, cnt), w, samples(gpu, dx, s, cnt)]);
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
  // Batch chunks run one after another, each adding to the previous: still a fixed order.
  batchChunks(gpu.limits, g, what).forEach(([s, cnt], i) => {
    const beta = opts.accumulate || i > 0 ? 1 : 0;
    const rows = cnt * g.oh;
    // Enough ranges to fill the device (a few hundred invocations keep both llvmpipe threads'
    // SIMD lanes busy; a GPU wants thousands), each within the loop budget.
    const target = gpu.info.software ? 512 : 16384;
    const maxRows = Math.floor(LOOP_BUDGET / (g.ow + 1));
    let rowsPerSplit = Math.min(maxRows, Math.ceil(rows / Math.ceil(target / (l.mBlocks * l.nBlocks))));
    // The partial sums must fit one binding: fewer, longer ranges if not (still within budget).
    const maxSplits = Math.floor(gpu.limits.maxStorageBufferBindingSize / 4 / size);
    rowsPerSplit = Math.max(rowsPerSplit, Math.ceil(rows / maxSplits));
    if (rowsPerSplit > maxRows) {
      throw new VtError('too-large', `${what}: ${Math.ceil(rows / maxRows)} partial filter gradients of ${size} floats do not fit one storage binding: use a smaller batch.`);
    }
    const splits = Math.ceil(rows / rowsPerSplit);
    const ins = [samples(gpu, x, s, cnt), samples(gpu, dy, s, cnt)];
    if (splits === 1) {
      dispatch(gpu, l, g, cnt, [['u32', 1], ['u32', rowsPerSplit], ['f32', beta]], [...ins, dw, null]);
      return;
    }
    const partial = gpu.empty([splits, size], 'f32', 'conv2d.dw.partial');
    dispatch(gpu, l, g, cnt, [['u32', splits], ['u32', rowsPerSplit], ['f32', 0]], [...ins, partial, null], splits);
    // The reduce runs one invocation per dw element: `size` blocks.
    dispatch(gpu, { ...l, k: 'bwdFilterReduce', mBlocks: 1, nBlocks: size }, g, cnt, [['u32', splits], ['u32', rowsPerSplit], ['f32', beta]], [null, null, dw, partial]);
    // Safe: commands recorded so far run before any later reuse of the buffer.
    gpu.release(partial);
  });
}
