// GEMM and conv2d on the wasm kernels (wasm/gemm.ts, wasm/conv.ts), with the shapes, checks
// and semantics of src/ops/gemm.ts and src/ops/conv2d.ts.
//   gemm: transB without transA (y = x W^T) runs the dot-product kernel (no packing, both
//     operands contiguous along K); every other case the packed 4x8 kernel.
//   conv2d, a group of images at a time (K = Cin*KH*KW, S = OH*OW, about 1,024 columns per
//   group: see groupOf), each a GEMM on im2col columns:
//     forward          y[Cout, S] = w[Cout, K] col[K, S]
//     backward input   dcol[K, S] = w^T dy[Cout, S], then dx (+)= col2im(dcol)
//     backward filter  dw[Cout, K] (+)= dy[Cout, S] col^T, group after group (fixed order)
//   A 1x1 stride-1 unpadded convolution of one image uses x (or dx) itself as the columns.
// A later threaded version splits the images (conv) or C's rows (gemm) between workers.
import { check } from '../errors.ts';
import { shapeStr } from '../gpu/tensor.ts';
import { type Conv2dBackwardOptions, type Conv2dGeometry, type Conv2dParams, normalizeConv2d } from '../ops/conv2d.ts';
import { type GemmParams, gemmDims } from '../ops/gemm.ts';
import type { WasmCtx, WasmTensor } from './tensor.ts';

const F = 4;

export function gemm(cx: WasmCtx, a: WasmTensor, b: WasmTensor, c: WasmTensor, p: GemmParams = {}): void {
  const what = 'gemm';
  const { batch, M, N, K } = gemmDims(a.shape, b.shape, c.shape, p);
  if (M === 0 || N === 0) return;
  const alpha = p.alpha ?? 1, beta = p.beta ?? 0;
  const pa = cx.ptr(a, what), pb = cx.ptr(b, what), pc = cx.ptr(c, what);
  const lda = p.transA ? M : K, ldb = p.transB ? K : N;
  const dot = !!p.transB && !p.transA;
  const scratch = dot ? 0 : cx.scratch('gemm', cx.k.gemmScratchBytes());
  for (let i = 0; i < batch; i++) {
    const ai = pa + i * M * K * F, bi = pb + i * K * N * F, ci = pc + i * M * N * F;
    if (dot) cx.k.gemmNT(M, N, K, ai, lda, bi, ldb, ci, N, alpha, beta);
    else cx.k.gemm(M, N, K, ai, lda, p.transA ? 1 : 0, bi, ldb, p.transB ? 1 : 0, ci, N, alpha, beta, scratch);
  }
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
function im2col(cx: WasmCtx, g: Conv2dGeometry, x: number, col: number, ld: number): void {
  cx.k.im2col(x, g.cin, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, col, ld);
}

/** dx (one image) += col2im(dcol[K, S], row stride ld). */
function col2imAdd(cx: WasmCtx, g: Conv2dGeometry, dcol: number, dx: number, ld: number): void {
  cx.k.col2imAdd(dcol, g.cin, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, dx, ld);
}

// x [N, Cin, H, W], w [Cout, Cin, KH, KW] -> out [N, Cout, OH, OW]
export function conv2dForward(cx: WasmCtx, x: WasmTensor, w: WasmTensor, out: WasmTensor, params: Conv2dParams): void {
  const what = 'conv2d.forward';
  const g = normalizeConv2d(x.shape, w.shape, params, what);
  checkShape(out, [g.n, g.cout, g.oh, g.ow], what, 'out');
  const K = g.cin * g.kh * g.kw, S = g.oh * g.ow, X = g.cin * g.h * g.w;
  const px = cx.ptr(x, what), pw = cx.ptr(w, what), py = cx.ptr(out, what);
  const nb = groupOf(g.n, S);
  const gs = cx.scratch('gemm', cx.k.gemmScratchBytes());
  const col = nb === 1 && isPointwise(g) ? 0 : cx.scratch('col', K * nb * S * F);
  const ytmp = nb === 1 ? 0 : cx.scratch('aux', g.cout * nb * S * F);
  for (let b0 = 0; b0 < g.n; b0 += nb) {
    const cnt = Math.min(nb, g.n - b0), ld = cnt * S;
    if (cnt === 1) {
      const xi = px + b0 * X * F;
      if (col) im2col(cx, g, xi, col, S);
      cx.k.gemm(g.cout, S, K, pw, K, 0, col || xi, S, 0, py + b0 * g.cout * S * F, S, 1, 0, gs);
      continue;
    }
    for (let i = 0; i < cnt; i++) im2col(cx, g, px + (b0 + i) * X * F, col + i * S * F, ld);
    cx.k.gemm(g.cout, ld, K, pw, K, 0, col, ld, 0, ytmp, ld, 1, 0, gs);
    for (let i = 0; i < cnt; i++) cx.k.copyRows(ytmp + i * S * F, ld, py + (b0 + i) * g.cout * S * F, S, g.cout, S);
  }
}

// dy [N, Cout, OH, OW], w [Cout, Cin, KH, KW] -> dx [N, Cin, H, W] (= or += by accumulate)
export function conv2dBackwardInput(cx: WasmCtx, dy: WasmTensor, w: WasmTensor, dx: WasmTensor, params: Conv2dParams, opts: Conv2dBackwardOptions = {}): void {
  const what = 'conv2d.backwardInput';
  const g = normalizeConv2d(dx.shape, w.shape, params, what);
  checkShape(dy, [g.n, g.cout, g.oh, g.ow], what, 'dy');
  const K = g.cin * g.kh * g.kw, S = g.oh * g.ow, X = g.cin * g.h * g.w;
  const pdy = cx.ptr(dy, what), pw = cx.ptr(w, what), pdx = cx.ptr(dx, what);
  const nb = groupOf(g.n, S);
  const direct = nb === 1 && isPointwise(g);
  const gs = cx.scratch('gemm', cx.k.gemmScratchBytes());
  const dcol = direct ? 0 : cx.scratch('col', K * nb * S * F);
  const dycat = nb === 1 ? 0 : cx.scratch('aux', g.cout * nb * S * F);
  for (let b0 = 0; b0 < g.n; b0 += nb) {
    const cnt = Math.min(nb, g.n - b0), ld = cnt * S;
    let src = pdy + b0 * g.cout * S * F;
    if (cnt > 1) {
      for (let i = 0; i < cnt; i++) cx.k.copyRows(pdy + (b0 + i) * g.cout * S * F, S, dycat + i * S * F, ld, g.cout, S);
      src = dycat;
    }
    if (direct) {
      cx.k.gemm(g.cin, S, g.cout, pw, K, 1, src, S, 0, pdx + b0 * X * F, S, 1, opts.accumulate ? 1 : 0, gs);
      continue;
    }
    cx.k.gemm(K, ld, g.cout, pw, K, 1, src, ld, 0, dcol, ld, 1, 0, gs);
    for (let i = 0; i < cnt; i++) {
      const dxi = pdx + (b0 + i) * X * F;
      if (!opts.accumulate) cx.k.fill(dxi, 0, X);
      col2imAdd(cx, g, dcol + i * S * F, dxi, ld);
    }
  }
}

// x [N, Cin, H, W], dy [N, Cout, OH, OW] -> dw [Cout, Cin, KH, KW] (= or += by accumulate)
export function conv2dBackwardFilter(cx: WasmCtx, x: WasmTensor, dy: WasmTensor, dw: WasmTensor, params: Conv2dParams, opts: Conv2dBackwardOptions = {}): void {
  const what = 'conv2d.backwardFilter';
  const g = normalizeConv2d(x.shape, dw.shape, params, what);
  checkShape(dy, [g.n, g.cout, g.oh, g.ow], what, 'dy');
  const K = g.cin * g.kh * g.kw, S = g.oh * g.ow, X = g.cin * g.h * g.w;
  const px = cx.ptr(x, what), pdy = cx.ptr(dy, what), pdw = cx.ptr(dw, what);
  const nb = groupOf(g.n, S);
  const col = nb === 1 && isPointwise(g) ? 0 : cx.scratch('col', K * nb * S * F);
  const dycat = nb === 1 ? 0 : cx.scratch('aux', g.cout * nb * S * F);
  for (let b0 = 0; b0 < g.n; b0 += nb) {
    const cnt = Math.min(nb, g.n - b0), ld = cnt * S;
    let a = pdy + b0 * g.cout * S * F;
    if (cnt > 1) {
      for (let i = 0; i < cnt; i++) cx.k.copyRows(pdy + (b0 + i) * g.cout * S * F, S, dycat + i * S * F, ld, g.cout, S);
      a = dycat;
    }
    if (col) for (let i = 0; i < cnt; i++) im2col(cx, g, px + (b0 + i) * X * F, col + i * S * F, ld);
    cx.k.gemmNT(g.cout, K, ld, a, ld, col || px + b0 * X * F, ld, pdw, K, 1, opts.accumulate || b0 > 0 ? 1 : 0);
  }
}
