// GEMM and conv2d on the wasm kernels (wasm/gemm.ts, wasm/conv.ts), with the shapes, checks
// and semantics of src/ops/gemm.ts and src/ops/conv2d.ts.
//   gemm: transB without transA (y = x W^T) runs the dot-product kernel (no packing, both
//     operands contiguous along K); every other case the packed 4x8 kernel.
//   conv2d, a group of images at a time (K = Cin*KH*KW, S = OH*OW, about 1,024 columns per
//   group: see groupOf), each a GEMM on im2col columns:
//     forward          y[Cout, S] = w[Cout, K] col[K, S]
//     backward input   dcol[K, S] = w^T dy[Cout, S], then dx (+)= col2im(dcol)
//     backward filter  dw[Cout, K] (+)= dy[Cout, S] col^T, group after group (fixed order), by gemmSegNT on dy where
//                      the images lie, and on x itself for a 1x1 stride-1 unpadded convolution (no columns)
//   A 1x1 stride-1 unpadded convolution of one image uses x (or dx) itself as the columns; of a group of images whose
//     maps hold a multiple of 8 pixels, its forward and input gradient run gemmSeg (wasm/gemm.ts) on the images where
//     they lie, the copies' bits (an input gradient of -0 stays -0; the copies added it to zeros) (ResNet-50's 1x1
//     layers at 64 pixels: maps of 256 to 16 pixels).
//   3x3 stride-1 convolutions with enough channels run by Winograd F(2x2, 3x3) instead
//   (src/wasm/ops-winograd.ts winogradFits; the engine's `winograd: 'off'` keeps them on im2col).
// Threads (cx.run, src/wasm/threads.ts) split each op by disjoint OUTPUTS, so every output
// element is computed by one thread in the same summation order as with one thread (results
// are bitwise identical for any thread count; the kernels' orders depend on K only, not on
// which rows or columns a call covers):
//   gemm       batches, or rows of C (multiples of 4), or columns of C (multiples of 8) when it is wider than tall
//   forward, backward input   groups of images (the groups of one thread); with fewer groups
//              than threads, each group's GEMM by rows (Cout, or K / Cin) between barriers
//   backward filter   groups of images: each thread's groups' partial sums into their own
//              buffers, then dw (+)= them in group order (each thread a range of dw); with
//              fewer groups than threads, rows of dw (output channels) group after group, each
//              group's sum into the thread's scratch then added, the group's columns built by all
//              threads (split by image) between barriers
import { check } from '../errors.ts';
import { shapeStr } from '../shapes/shape.ts';
import { type Conv2dBackwardOptions, type Conv2dGeometry, type Conv2dParams, normalizeConv2d } from '../shapes/conv2d.ts';
import { type GemmParams, gemmDims } from '../shapes/gemm.ts';
import type { Kernels } from './kernels.ts';
import { groupsPerRound, MIN_SPLIT_MACS, splitRange, sumGroupsInOrder } from './split.ts';
import { winogradBackwardFilter, winogradBackwardInput, winogradFits, winogradForward } from './ops-winograd.ts';
import type { PartCtx, PointwiseMode, WasmCtx, WasmTensor } from './tensor.ts';

const F = 4;

/** How many parts an op of `macs` multiply-adds over `units` splittable units gets. */
const partsFor = (cx: WasmCtx, units: number, macs: number): number => (macs < MIN_SPLIT_MACS ? 1 : Math.max(1, Math.min(cx.threads, units)));

export function gemm(cx: WasmCtx, a: WasmTensor, b: WasmTensor, c: WasmTensor, p: GemmParams = {}): void {
  const what = 'gemm';
  const { batch, M, N, K } = gemmDims(a.shape, b.shape, c.shape, p);
  if (M === 0 || N === 0) return;
  const alpha = p.alpha ?? 1, beta = p.beta ?? 0;
  const pa = cx.ptr(a, what), pb = cx.ptr(b, what), pc = cx.ptr(c, what);
  const lda = p.transA ? M : K, ldb = p.transB ? K : N;
  const dot = !!p.transB && !p.transA;
  const gsBytes = cx.sizes.gemmScratchBytes();
  // Row r of op(A): row r of A, or column r of A stored [K, M].
  const rowA = (r: number) => (p.transA ? r : r * lda) * F;
  const byBatch = batch >= cx.threads;
  // Wider than tall: parts take columns of C (multiples of the 8-column panel), so each reads or packs only its share of
  // B, the larger operand (a linear layer's input gradient reads all of the weights once, not once a part).
  const byCols = !byBatch && N > M;
  const parts = partsFor(cx, byBatch ? batch : byCols ? Math.ceil(N / 8) : Math.ceil(M / 4), batch * M * N * K);
  cx.run(parts, (px, t) => {
    const scratch = dot ? 0 : px.scratch('gemm', gsBytes);
    const [i0, i1] = byBatch ? splitRange(batch, parts, t) : [0, batch];
    const [r0, r1] = byBatch || byCols ? [0, M] : splitRange(M, parts, t, 4);
    const [c0, c1] = byCols ? splitRange(N, parts, t, 8) : [0, N];
    if (r1 <= r0 || c1 <= c0) return;
    const colB = (p.transB ? c0 * ldb : c0) * F;
    for (let i = i0; i < i1; i++) {
      const ai = pa + i * M * K * F + rowA(r0), bi = pb + i * K * N * F + colB, ci = pc + ((i * M + r0) * N + c0) * F;
      if (dot) px.k.gemmNT(r1 - r0, c1 - c0, K, ai, lda, bi, ldb, ci, N, alpha, beta);
      else px.k.gemm(r1 - r0, c1 - c0, K, ai, lda, p.transA ? 1 : 0, bi, ldb, p.transB ? 1 : 0, ci, N, alpha, beta, scratch);
    }
  });
}

function checkShape(t: WasmTensor, shape: readonly number[], what: string, name: string): void {
  check(t.shape.length === shape.length && t.shape.every((d, i) => d === shape[i]), what, () => `${name} must be ${shapeStr(shape)}, got ${shapeStr(t.shape)}`);
}

/** Pointwise: the columns are the image itself. */
const isPointwise = (g: Conv2dGeometry): boolean => g.kh === 1 && g.kw === 1 && g.sh === 1 && g.sw === 1 && g.ph === 0 && g.pw === 0;

/**
 * Images per GEMM: small feature maps (ResNet's 8x8: S = 64) put several images' columns side
 * by side, so each GEMM has about TARGET_COLS columns (long packed panels, A packed once per
 * group, fewer passes over C); the output or dy rows are then copied from or to [C, cnt*S].
 */
const TARGET_COLS = 1024;
const groupOf = (n: number, S: number): number => Math.max(1, Math.min(n, Math.floor(TARGET_COLS / S)));

/** col[K, S] (row stride ld) = im2col(one image at x). */
function im2col(k: Kernels, g: Conv2dGeometry, x: number, col: number, ld: number): void {
  k.im2col(x, g.cin, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, col, ld);
}

/** dx (one image) += col2im(dcol[K, S], row stride ld). */
function col2imAdd(k: Kernels, g: Conv2dGeometry, dcol: number, dx: number, ld: number): void {
  k.col2imAdd(dcol, g.cin, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, dx, ld);
}

/**
 * Pointers and sizes of one conv2d call. `segs`: a pointwise convolution of several images a group whose maps hold a
 * multiple of 8 pixels; its forward and input gradient run gemmSeg on the images where they lie (each image a segment
 * of the GEMM's columns), where other groups copy their columns side by side and the result back.
 */
interface ConvJob { g: Conv2dGeometry; K: number; S: number; X: number; nb: number; accumulate: boolean; segs: boolean }

/** The GEMM's panel width (wasm/gemm.ts NR): gemmSeg's segments are a multiple of it. */
const NR = 8;

/** The sizes every conv driver derives from the geometry: im2col rows K, output pixels S, input floats X, images per group nb. */
function convJob(g: Conv2dGeometry, accumulate: boolean, pointwise: PointwiseMode): ConvJob {
  const S = g.oh * g.ow, nb = groupOf(g.n, S);
  const segs = pointwise === 'segments' && nb > 1 && isPointwise(g) && S % NR === 0;
  return { g, K: g.cin * g.kh * g.kw, S, X: g.cin * g.h * g.w, nb, accumulate, segs };
}

/**
 * Runs a conv op: groups of images split between threads (each thread `images(pc, i0, i1,
 * own scratch)`), or, with fewer groups than threads, every thread on all images with the
 * GEMMs split by `rows` (shared scratch, barriers): `phased(pc, t, parts)`.
 */
function runConv(cx: WasmCtx, j: ConvJob, macs: number, rows: number,
  images: (pc: PartCtx, i0: number, i1: number) => void, phased: (pc: PartCtx, t: number, parts: number) => void): void {
  const groups = Math.ceil(j.g.n / j.nb);
  if (macs < MIN_SPLIT_MACS || cx.threads === 1 || groups >= cx.threads) {
    const parts = partsFor(cx, groups, macs);
    cx.run(parts, (pc, t) => {
      const [q0, q1] = splitRange(groups, parts, t);
      if (q1 > q0) images(pc, q0 * j.nb, Math.min(j.g.n, q1 * j.nb));
    });
    return;
  }
  const parts = Math.min(cx.threads, Math.ceil(rows / 4));
  cx.run(parts, (pc, t) => phased(pc, t, parts));
}

// x [N, Cin, H, W], w [Cout, Cin, KH, KW] -> out [N, Cout, OH, OW]
export function conv2dForward(cx: WasmCtx, x: WasmTensor, w: WasmTensor, out: WasmTensor, params: Conv2dParams): void {
  const what = 'conv2d.forward';
  const g = normalizeConv2d(x.shape, w.shape, params, what);
  checkShape(out, [g.n, g.cout, g.oh, g.ow], what, 'out');
  const j = convJob(g, false, cx.pointwise);
  const px = cx.ptr(x, what), pw = cx.ptr(w, what), py = cx.ptr(out, what);
  if (winogradFits(g, cx.winograd)) return winogradForward(cx, g, px, pw, py);
  const gsBytes = cx.sizes.gemmScratchBytes();
  const noCol = (j.nb === 1 && isPointwise(g)) || j.segs, noY = j.nb === 1 || j.segs;
  const colBytes = j.K * j.nb * j.S * F, yBytes = g.cout * j.nb * j.S * F;
  runConv(cx, j, g.n * g.cout * j.K * j.S, g.cout,
    (pc, i0, i1) => forwardGroups(pc.k, j, px, pw, py, i0, i1, 0, 1, () => {}, pc.scratch('gemm', gsBytes),
      noCol ? 0 : pc.scratch('col', colBytes), noY ? 0 : pc.scratch('aux', yBytes)),
    (pc, t, parts) => forwardGroups(pc.k, j, px, pw, py, 0, g.n, t, parts, () => pc.barrier(), pc.scratch('gemm', gsBytes),
      noCol ? 0 : cx.scratch('col', colBytes), noY ? 0 : cx.scratch('aux', yBytes)));
}

/** Images [i0, i1) in groups of nb; this is part t of `parts` (rows of Cout; images of a group). */
function forwardGroups(k: Kernels, j: ConvJob, px: number, pw: number, py: number, i0: number, i1: number,
  t: number, parts: number, barrier: () => void, gs: number, col: number, ytmp: number): void {
  const { g, K, S, X, nb } = j;
  const [r0, r1] = splitRange(g.cout, parts, t, 4);
  for (let b0 = i0; b0 < i1; b0 += nb) {
    const cnt = Math.min(nb, i1 - b0), ld = cnt * S;
    if (j.segs) {
      // Each image's output rows r0.. straight from its own input: nothing shared between parts, so no barriers.
      if (r1 > r0) k.gemmSeg(r1 - r0, ld, K, pw + r0 * K * F, K, 0, px + b0 * X * F, S, X, py + (b0 * g.cout + r0) * S * F, g.cout * S, 1, 0, gs);
      continue;
    }
    const [m0, m1] = splitRange(cnt, parts, t);
    if (b0 > i0) barrier(); // the previous group's readers of col and ytmp are done
    if (col) {
      for (let i = m0; i < m1; i++) im2col(k, g, px + (b0 + i) * X * F, col + i * S * F, ld);
      barrier();
    }
    const dst = cnt === 1 ? py + b0 * g.cout * S * F : ytmp;
    if (r1 > r0) k.gemm(r1 - r0, ld, K, pw + r0 * K * F, K, 0, col || px + b0 * X * F, ld, 0, dst + r0 * ld * F, ld, 1, 0, gs);
    if (cnt === 1) continue;
    barrier();
    for (let i = m0; i < m1; i++) k.copyRows(ytmp + i * S * F, ld, py + (b0 + i) * g.cout * S * F, S, g.cout, S);
  }
}

// dy [N, Cout, OH, OW], w [Cout, Cin, KH, KW] -> dx [N, Cin, H, W] (= or += by accumulate)
export function conv2dBackwardInput(cx: WasmCtx, dy: WasmTensor, w: WasmTensor, dx: WasmTensor, params: Conv2dParams, opts: Conv2dBackwardOptions = {}): void {
  const what = 'conv2d.backwardInput';
  const g = normalizeConv2d(dx.shape, w.shape, params, what);
  checkShape(dy, [g.n, g.cout, g.oh, g.ow], what, 'dy');
  const j = convJob(g, !!opts.accumulate, cx.pointwise);
  const pdy = cx.ptr(dy, what), pw = cx.ptr(w, what), pdx = cx.ptr(dx, what);
  if (winogradFits(g, cx.winograd)) return winogradBackwardInput(cx, g, pdy, pw, pdx, j.accumulate);
  const direct = (j.nb === 1 && isPointwise(g)) || j.segs, noCat = j.nb === 1 || j.segs;
  const gsBytes = cx.sizes.gemmScratchBytes();
  const colBytes = j.K * j.nb * j.S * F, dyBytes = g.cout * j.nb * j.S * F;
  runConv(cx, j, g.n * g.cout * j.K * j.S, direct ? g.cin : j.K,
    (pc, i0, i1) => backwardInputGroups(pc.k, j, direct, pdy, pw, pdx, i0, i1, 0, 1, () => {}, pc.scratch('gemm', gsBytes),
      direct ? 0 : pc.scratch('col', colBytes), noCat ? 0 : pc.scratch('aux', dyBytes)),
    (pc, t, parts) => backwardInputGroups(pc.k, j, direct, pdy, pw, pdx, 0, g.n, t, parts, () => pc.barrier(), pc.scratch('gemm', gsBytes),
      direct ? 0 : cx.scratch('col', colBytes), noCat ? 0 : cx.scratch('aux', dyBytes)));
}

/** Images [i0, i1) in groups of nb; part t of `parts` (rows of dcol, or of dx when direct; images of a group). */
function backwardInputGroups(k: Kernels, j: ConvJob, direct: boolean, pdy: number, pw: number, pdx: number, i0: number, i1: number,
  t: number, parts: number, barrier: () => void, gs: number, dcol: number, dycat: number): void {
  const { g, K, S, X, nb } = j;
  const [r0, r1] = splitRange(direct ? g.cin : K, parts, t, 4);
  for (let b0 = i0; b0 < i1; b0 += nb) {
    const cnt = Math.min(nb, i1 - b0), ld = cnt * S;
    if (j.segs) {
      // Each image's dx rows r0.. (input channels) straight from its own dy: nothing shared between parts.
      if (r1 > r0) {
        k.gemmSeg(r1 - r0, ld, g.cout, pw + r0 * F, K, 1, pdy + b0 * g.cout * S * F, S, g.cout * S, pdx + (b0 * X + r0 * S) * F, X, 1,
          j.accumulate ? 1 : 0, gs);
      }
      continue;
    }
    const [m0, m1] = splitRange(cnt, parts, t);
    if (b0 > i0) barrier(); // the previous group's readers of dycat and dcol are done
    let src = pdy + b0 * g.cout * S * F;
    if (cnt > 1) {
      for (let i = m0; i < m1; i++) k.copyRows(pdy + (b0 + i) * g.cout * S * F, S, dycat + i * S * F, ld, g.cout, S);
      barrier();
      src = dycat;
    }
    if (direct) {
      if (r1 > r0) k.gemm(r1 - r0, S, g.cout, pw + r0 * F, K, 1, src, S, 0, pdx + b0 * X * F + r0 * S * F, S, 1, j.accumulate ? 1 : 0, gs);
      continue;
    }
    if (r1 > r0) k.gemm(r1 - r0, ld, g.cout, pw + r0 * F, K, 1, src, ld, 0, dcol + r0 * ld * F, ld, 1, 0, gs);
    barrier();
    for (let i = m0; i < m1; i++) {
      const dxi = pdx + (b0 + i) * X * F;
      if (!j.accumulate) k.fill(dxi, 0, X);
      col2imAdd(k, g, dcol + i * S * F, dxi, ld);
    }
  }
}

// x [N, Cin, H, W], dy [N, Cout, OH, OW] -> dw [Cout, Cin, KH, KW] (= or += by accumulate)
export function conv2dBackwardFilter(cx: WasmCtx, x: WasmTensor, dy: WasmTensor, dw: WasmTensor, params: Conv2dParams, opts: Conv2dBackwardOptions = {}): void {
  const what = 'conv2d.backwardFilter';
  const g = normalizeConv2d(x.shape, dw.shape, params, what);
  checkShape(dy, [g.n, g.cout, g.oh, g.ow], what, 'dy');
  // The filter gradient reads dy (and x, for a 1x1 stride-1 convolution) where the images lie: gemmSegNT packs them.
  const j = convJob(g, !!opts.accumulate, 'copy');
  const px = cx.ptr(x, what), pdy = cx.ptr(dy, what), pdw = cx.ptr(dw, what);
  if (winogradFits(g, cx.winograd)) return winogradBackwardFilter(cx, g, px, pdy, pdw, j.accumulate);
  const groups = Math.ceil(g.n / j.nb);
  const macs = g.n * g.cout * j.K * j.S;
  if (macs >= MIN_SPLIT_MACS && cx.threads > 1 && groups >= cx.threads) filterByGroups(cx, j, px, pdy, pdw, groups);
  else filterByRows(cx, j, px, pdy, pdw, partsFor(cx, Math.ceil(g.cout / 4), macs));
}

/**
 * The filter gradient's GEMM of one group of images [b0, b0 + cnt), rows [r0, r1) of dw: dst = dy col^T (written), by
 * gemmSegNT where the images lie: A the group's dy rows (an image a segment), B x itself for a 1x1 stride-1 unpadded
 * convolution (an image a segment) or the group's im2col columns `col` (one segment). The same arithmetic whichever
 * rows a part takes (the kernel's order depends on the group's columns only).
 */
function filterGemm(k: Kernels, j: ConvJob, px: number, pdy: number, b0: number, cnt: number, r0: number, r1: number, col: number, dst: number,
  gs: number): void {
  const { g, K, S, X } = j, ld = cnt * S;
  const a = pdy + (b0 * g.cout + r0) * S * F;
  if (col) k.gemmSegNT(r1 - r0, K, ld, a, S, g.cout * S, col, ld, 0, dst, K, gs);
  else k.gemmSegNT(r1 - r0, K, ld, a, S, g.cout * S, px + b0 * X * F, S, X, dst, K, gs);
}

/**
 * dw summed over groups of images as one thread does it, dw (+)= r_0, += r_1, ... in group
 * order, where r_q = dy_q col_q^T: the threads compute the r_q of different groups into
 * separate buffers (each with its own columns), then each adds them in group order into its own
 * range of dw's elements (split.ts sumGroupsInOrder).
 */
function filterByGroups(cx: WasmCtx, j: ConvJob, px: number, pdy: number, pdw: number, groups: number): void {
  const { g, K, S, X, nb } = j;
  const T = cx.threads, W = g.cout * K;
  const partials = cx.scratch('aux2', groupsPerRound(groups, T, W) * W * F);
  const noCol = isPointwise(g);
  const colBytes = K * nb * S * F, gsBytes = cx.sizes.gemmScratchBytes();
  cx.run(T, (pc, t) => {
    const col = noCol ? 0 : pc.scratch('col', colBytes), gs = pc.scratch('gemm', gsBytes);
    sumGroupsInOrder(pc, t, T, groups, W, partials, pdw, j.accumulate, (q, dst) => {
      const b0 = q * nb, cnt = Math.min(nb, g.n - b0), ld = cnt * S;
      if (col) for (let i = 0; i < cnt; i++) im2col(pc.k, g, px + (b0 + i) * X * F, col + i * S * F, ld);
      filterGemm(pc.k, j, px, pdy, b0, cnt, 0, g.cout, col, dst, gs);
    });
  });
}

/**
 * dw by rows (output channels) per part, group after group as with one thread: the first group's r_0 straight into dw
 * (unless accumulating), every later r_q into the part's own rows of scratch and then added, so dw = r_0 + r_1 + ... in
 * the order and with the values filterByGroups adds. A group's im2col columns (none for a 1x1 stride-1 convolution) are
 * built by all parts (split by image) and shared: two buffers used in turn, so one barrier per group suffices (a part
 * writes buffer q & 1 only after every part passed group q-1's barrier, i.e. finished reading it in group q-2).
 */
function filterByRows(cx: WasmCtx, j: ConvJob, px: number, pdy: number, pdw: number, parts: number): void {
  const { g, K, S, X, nb } = j;
  const noCol = isPointwise(g);
  const colBytes = K * nb * S * F, gsBytes = cx.sizes.gemmScratchBytes();
  const col = noCol ? [0, 0] : [cx.scratch('col', colBytes), parts > 1 ? cx.scratch('col2', colBytes) : 0];
  if (parts === 1) col[1] = col[0]!;
  cx.run(parts, (pc, t) => {
    const [r0, r1] = splitRange(g.cout, parts, t, 4);
    const gs = pc.scratch('gemm', gsBytes);
    const tmp = r1 > r0 && (j.accumulate || g.n > nb) ? pc.scratch('aux', (r1 - r0) * K * F) : 0;
    for (let b0 = 0, q = 0; b0 < g.n; b0 += nb, q++) {
      const cnt = Math.min(nb, g.n - b0);
      const [m0, m1] = splitRange(cnt, parts, t);
      const cb = col[q & 1]!;
      if (cb) {
        for (let i = m0; i < m1; i++) im2col(pc.k, g, px + (b0 + i) * X * F, cb + i * S * F, cnt * S);
        pc.barrier();
      }
      if (r1 <= r0) continue;
      const rows = pdw + r0 * K * F;
      if (b0 === 0 && !j.accumulate) {
        filterGemm(pc.k, j, px, pdy, b0, cnt, r0, r1, cb, rows, gs);
        continue;
      }
      filterGemm(pc.k, j, px, pdy, b0, cnt, r0, r1, cb, tmp, gs);
      pc.k.add(rows, tmp, rows, (r1 - r0) * K);
    }
  });
}
