// GEMM kernels: C = alpha * op(A) op(B) + beta * C, f32, row-major, one matrix (the engine
// loops over batches). Pointers are byte addresses in the engine's memory; leading dimensions
// are in elements. beta == 0 never reads C (a NaN there does not leak into the result).
//
// Two kernels, chosen by layout:
//  - gemm (packed, outer-product): BLIS loop order jc (NC columns) > pc (KC of the reduction)
//    > ic (MC rows) > jr (8-column micro-panels) > ir (4-row micro-panels). B's KC x NC block
//    is packed into 8-wide k-major panels, A's MC x KC block (times alpha) into 4-tall panels;
//    the 4x8 micro-kernel keeps 8 f32x4 accumulators in registers and per k does 2 loads of B,
//    4 load-splats of A and 8 mul + 8 add. Edge tiles are computed whole on zero padding and
//    written through a small tile buffer. Used for A B, A^T B and A^T B^T.
//  - gemmNT (dot-product, no packing): A [M, K] and B [N, K] both have K contiguous
//    (y = x W^T, and the Winograd filter gradients' per-position GEMMs); 4x2 outputs per loop, f32x4 partial
//    sums along K, a fixed-order horizontal sum, then the K % 4 tail in order.
//  - gemmSegNT (packed, A B^T of segments along K): gemm's blocks and micro-kernel, A and B packed from segments
//    (several images' dy and x, or im2col columns) by 4x4 transposes: conv2d's im2col and 1x1 filter gradients (before
//    session 57 their rows were copied side by side for gemmNT).
// Summation orders depend only on the shapes: identical inputs give identical bits.
// Threads later: both kernels can split C by rows (ic blocks / 4-row blocks) with private
// packing buffers; nothing here is shared between row blocks except B's packed block.

export const MR: i32 = 4;
export const NR: i32 = 8;
export const KC: i32 = 256;
export const MC: i32 = 128;
export const NC: i32 = 2048;

/** Bytes of scratch gemm() needs: B block, A block, one MR x NR tile. */
export function gemmScratchBytes(): i32 {
  return (KC * NC + MC * KC + MR * NR) * 4;
}

/**
 * a * b + c per lane. With relaxed SIMD (the kernels-*-fma builds) one relaxed_madd: a fused
 * multiply-add (one rounding) on CPUs with FMA, mul then add (two) on those without; which is
 * fixed per machine, so bits stay a function of the shapes and inputs on any one device.
 * Without it, mul then add.
 */
@inline export function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(c, f32x4.mul(a, b));
}

// Store modes of a tile: C = acc, C += acc, C = beta * C + acc.
const SET: i32 = 0;
const ADD: i32 = 1;
const SCALE: i32 = 2;

@inline function storeRow(c: usize, v0: v128, v1: v128, mode: i32, vb: v128): void {
  if (mode == SET) {
    v128.store(c, v0);
    v128.store(c, v1, 16);
  } else if (mode == ADD) {
    v128.store(c, f32x4.add(v128.load(c), v0));
    v128.store(c, f32x4.add(v128.load(c, 16), v1), 16);
  } else {
    v128.store(c, f32x4.add(f32x4.mul(v128.load(c), vb), v0));
    v128.store(c, f32x4.add(f32x4.mul(v128.load(c, 16), vb), v1), 16);
  }
}

/** 4x8 tile of C (row stride ldcB bytes) from kc steps of packed A (4 per k) and B (8 per k). */
function micro4x8(kc: i32, a: usize, b: usize, c: usize, ldcB: usize, mode: i32, beta: f32): void {
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  for (let k = 0; k < kc; k++) {
    const b0 = v128.load(b);
    const b1 = v128.load(b, 16);
    let av = v128.load32_splat(a);
    c00 = madd(av, b0, c00);
    c01 = madd(av, b1, c01);
    av = v128.load32_splat(a, 4);
    c10 = madd(av, b0, c10);
    c11 = madd(av, b1, c11);
    av = v128.load32_splat(a, 8);
    c20 = madd(av, b0, c20);
    c21 = madd(av, b1, c21);
    av = v128.load32_splat(a, 12);
    c30 = madd(av, b0, c30);
    c31 = madd(av, b1, c31);
    a += 16;
    b += 32;
  }
  const vb = f32x4.splat(beta);
  storeRow(c, c00, c01, mode, vb);
  storeRow(c + ldcB, c10, c11, mode, vb);
  storeRow(c + 2 * ldcB, c20, c21, mode, vb);
  storeRow(c + 3 * ldcB, c30, c31, mode, vb);
}

/** Copies kc rows of 8 floats (src, rows `step` bytes apart) into the panel at p (k-major, 8 floats a row). */
@inline function packPanel(kc: i32, src: usize, step: usize, p: usize): void {
  for (let k = 0; k < kc; k++) {
    const d = p + <usize>k * 32;
    v128.store(d, v128.load(src));
    v128.store(d, v128.load(src, 16), 16);
    src += step;
  }
}

/**
 * Two panels at once (p0 the first 8 columns, p1 the next 8). Each row's 16 columns (one 64-byte line where aligned)
 * are read once and go to both panels. One panel at a time read each line twice, a panel apart, and with rows a power
 * of two apart (1,024 columns: 4 KiB, the same L1 sets) the line could have left L1 before the second read: GEMMs of
 * 1,024 columns ran 1.006-1.053x faster with pairs (docs/wasm.md). The same values land in the same places.
 */
@inline function packPanelPair(kc: i32, src: usize, step: usize, p0: usize, p1: usize): void {
  for (let k = 0; k < kc; k++) {
    const d = <usize>k * 32;
    v128.store(p0 + d, v128.load(src));
    v128.store(p0 + d, v128.load(src, 16), 16);
    v128.store(p1 + d, v128.load(src, 32));
    v128.store(p1 + d, v128.load(src, 48), 16);
    src += step;
  }
}

/** Packs B[pc .. pc+kc, jc .. jc+nc] into 8-wide panels (kc x 8 each, zero padded). */
function packB(kc: i32, nc: i32, b: usize, ldb: i32, transB: bool, pc: i32, jc: i32, dst: usize, seg: i32, segB: i32): void {
  if (seg > 0) {
    packSegB(kc, nc, b, pc, jc, dst, seg, segB);
    return;
  }
  const step = <usize>ldb * 4;
  let jr = 0;
  if (!transB) {
    for (; jr + 2 * NR <= nc; jr += 2 * NR) {
      const p0 = dst + <usize>(jr * kc) * 4;
      packPanelPair(kc, b + (<usize>pc * ldb + jc + jr) * 4, step, p0, p0 + <usize>(NR * kc) * 4);
    }
  }
  for (; jr < nc; jr += NR) {
    const nr = min(NR, nc - jr);
    const panel = dst + <usize>(jr * kc) * 4;
    if (!transB && nr == NR) {
      packPanel(kc, b + (<usize>pc * ldb + jc + jr) * 4, step, panel);
    } else if (!transB) {
      for (let k = 0; k < kc; k++) {
        const src = b + (<usize>(pc + k) * ldb + jc + jr) * 4;
        const d = panel + <usize>k * 32;
        for (let j = 0; j < NR; j++) store<f32>(d + j * 4, j < nr ? load<f32>(src + j * 4) : 0);
      }
    } else {
      // B stored [N, K]: column n of op(B) is row n of B, contiguous in k.
      for (let j = 0; j < NR; j++) {
        const d = panel + j * 4;
        if (j < nr) {
          const src = b + (<usize>(jc + jr + j) * ldb + pc) * 4;
          for (let k = 0; k < kc; k++) store<f32>(d + <usize>k * 32, load<f32>(src + <usize>k * 4));
        } else {
          for (let k = 0; k < kc; k++) store<f32>(d + <usize>k * 32, 0);
        }
      }
    }
  }
}

/**
 * packB for a B of segments (gemmSeg): column j is column j % seg of segment j / seg, segments segB floats apart, rows
 * seg floats apart. seg is a multiple of NR, so a panel never straddles two segments; two panels at a time where both
 * lie in one segment, as packB does.
 */
function packSegB(kc: i32, nc: i32, b: usize, pc: i32, jc: i32, dst: usize, seg: i32, segB: i32): void {
  const step = <usize>seg * 4;
  let jr = 0;
  while (jr < nc) {
    const j = jc + jr;
    const within = j % seg;
    const src = b + (<usize>(j / seg) * segB + <usize>pc * seg + within) * 4;
    const p0 = dst + <usize>(jr * kc) * 4;
    if (jr + 2 * NR <= nc && within + 2 * NR <= seg) {
      packPanelPair(kc, src, step, p0, p0 + <usize>(NR * kc) * 4);
      jr += 2 * NR;
    } else {
      packPanel(kc, src, step, p0);
      jr += NR;
    }
  }
}

/** Packs alpha * A[ic .. ic+mc, pc .. pc+kc] into 4-tall panels (kc x 4 each, zero padded). */
function packA(mc: i32, kc: i32, a: usize, lda: i32, transA: bool, ic: i32, pc: i32, alpha: f32, dst: usize): void {
  // A in rows times 1 is a copy: four columns of four rows at a time, transposed (packSegRows with one segment of rows).
  if (!transA && alpha == 1) {
    packSegRows(mc, kc, a, lda, 0, ic, pc, MR, dst);
    return;
  }
  const va = f32x4.splat(alpha);
  for (let ir = 0; ir < mc; ir += MR) {
    const mr = min(MR, mc - ir);
    const panel = dst + <usize>(ir * kc) * 4;
    if (transA && mr == MR) {
      // A stored [K, M]: the 4 rows at one k are contiguous.
      let src = a + (<usize>pc * lda + ic + ir) * 4;
      const step = <usize>lda * 4;
      for (let k = 0; k < kc; k++) {
        v128.store(panel + <usize>k * 16, f32x4.mul(v128.load(src), va));
        src += step;
      }
    } else if (transA) {
      for (let k = 0; k < kc; k++) {
        const src = a + (<usize>(pc + k) * lda + ic + ir) * 4;
        for (let i = 0; i < MR; i++) store<f32>(panel + <usize>k * 16 + i * 4, i < mr ? load<f32>(src + i * 4) * alpha : 0);
      }
    } else {
      for (let i = 0; i < MR; i++) {
        const d = panel + i * 4;
        if (i < mr) {
          const src = a + (<usize>(ic + ir + i) * lda + pc) * 4;
          for (let k = 0; k < kc; k++) store<f32>(d + <usize>k * 16, load<f32>(src + <usize>k * 4) * alpha);
        } else {
          for (let k = 0; k < kc; k++) store<f32>(d + <usize>k * 16, 0);
        }
      }
    }
  }
}

/** Writes the top-left mr x nr of an MR x NR tile (row stride NR) into C with `mode`. */
function mergeTile(mr: i32, nr: i32, tile: usize, c: usize, ldc: i32, mode: i32, beta: f32): void {
  for (let i = 0; i < mr; i++) {
    for (let j = 0; j < nr; j++) {
      const p = c + (<usize>i * ldc + j) * 4;
      const v = load<f32>(tile + (i * NR + j) * 4);
      if (mode == SET) store<f32>(p, v);
      else if (mode == ADD) store<f32>(p, load<f32>(p) + v);
      else store<f32>(p, load<f32>(p) * beta + v);
    }
  }
}

/** C = beta * C (beta 0 writes zeros): the K = 0 case. */
function scaleC(m: i32, n: i32, c: usize, ldc: i32, beta: f32): void {
  for (let i = 0; i < m; i++) {
    const row = c + <usize>i * ldc * 4;
    for (let j = 0; j < n; j++) store<f32>(row + j * 4, beta == 0 ? 0 : load<f32>(row + j * 4) * beta);
  }
}

/**
 * The micro-tiles of an mc x nc block of C (at c) from kc steps of A's 4-row panels (panel i at ap + i * lenA * MR
 * floats) and B's 8-column panels (panel j at bp + j * lenB * NR floats): whole tiles straight into C, edge tiles
 * through `tile`. The panel lengths are kc for gemm's packed blocks, K for gemmPanels' operands.
 */
function tiles(mc: i32, nc: i32, kc: i32, ap: usize, lenA: i32, bp: usize, lenB: i32, c: usize, ldc: i32, mode: i32, beta: f32, tile: usize,
  seg: i32 = 0, segC: i32 = 0, j0: i32 = 0): void {
  const ldcB = <usize>ldc * 4;
  for (let jr = 0; jr < nc; jr += NR) {
    const nr = min(NR, nc - jr);
    const bpanel = bp + <usize>jr * lenB * 4;
    // C of segments (gemmSeg): column j0 + jr is column (j0 + jr) % seg of segment (j0 + jr) / seg, and ldc is seg.
    const cj = seg == 0 ? c + <usize>jr * 4 : c + (<usize>((j0 + jr) / seg) * segC + <usize>((j0 + jr) % seg)) * 4;
    for (let ir = 0; ir < mc; ir += MR) {
      const mr = min(MR, mc - ir);
      const apanel = ap + <usize>ir * lenA * 4;
      const cp = cj + <usize>ir * ldc * 4;
      if (mr == MR && nr == NR) {
        micro4x8(kc, apanel, bpanel, cp, ldcB, mode, beta);
      } else {
        micro4x8(kc, apanel, bpanel, tile, NR * 4, SET, 0);
        mergeTile(mr, nr, tile, cp, ldc, mode, beta);
      }
    }
  }
}

/** Rows [ic, ic + mc) x columns of one packed B block: A packing, then micro-tiles. */
function gemmRows(mc: i32, nc: i32, kc: i32, a: usize, lda: i32, transA: bool, ic: i32, pc: i32, alpha: f32,
  bp: usize, c: usize, ldc: i32, mode: i32, beta: f32, ap: usize, tile: usize, seg: i32, segC: i32, j0: i32): void {
  packA(mc, kc, a, lda, transA, ic, pc, alpha, ap);
  tiles(mc, nc, kc, ap, kc, bp, kc, c + <usize>ic * ldc * 4, ldc, mode, beta, tile, seg, segC, j0);
}

/** C[M, N] = alpha op(A) op(B) + beta C with the packed kernel (any transposes). */
export function gemm(M: i32, N: i32, K: i32, a: usize, lda: i32, transA: bool, b: usize, ldb: i32, transB: bool,
  c: usize, ldc: i32, alpha: f32, beta: f32, scratch: usize): void {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scaleC(M, N, c, ldc, beta);
    return;
  }
  packedGemm(M, N, K, a, lda, transA, b, ldb, transB, c, ldc, alpha, beta, scratch, 0, 0, 0);
}

/**
 * gemm() with B and C made of segments side by side: N = count * seg columns, column j being column j % seg of
 * segment j / seg. B's segments (K x seg, rows seg floats apart) start segB floats apart, C's (M x seg) segC apart.
 * That is a 1x1 convolution of several images at once (a segment an image: seg its pixels, segB and segC its input
 * and output planes), without copying their columns side by side first and the result back after. The same
 * arithmetic as gemm() on the copied operands: the same values packed, the same blocks, micro-kernel and order, so
 * the same bits. seg must be a multiple of NR (a panel or tile never straddles segments), K > 0, no transposed B.
 */
export function gemmSeg(M: i32, N: i32, K: i32, a: usize, lda: i32, transA: bool, b: usize, seg: i32, segB: i32,
  c: usize, segC: i32, alpha: f32, beta: f32, scratch: usize): void {
  if (M <= 0 || N <= 0 || K <= 0 || seg <= 0 || seg % NR != 0 || N % seg != 0) unreachable();
  packedGemm(M, N, K, a, lda, transA, b, seg, false, c, seg, alpha, beta, scratch, seg, segB, segC);
}

function packedGemm(M: i32, N: i32, K: i32, a: usize, lda: i32, transA: bool, b: usize, ldb: i32, transB: bool,
  c: usize, ldc: i32, alpha: f32, beta: f32, scratch: usize, seg: i32, segB: i32, segC: i32): void {
  const bp = scratch;
  const ap = bp + <usize>(KC * NC) * 4;
  const tile = ap + <usize>(MC * KC) * 4;
  for (let jc = 0; jc < N; jc += NC) {
    const nc = min(NC, N - jc);
    const cj = seg == 0 ? c + <usize>jc * 4 : c;
    for (let pc = 0; pc < K; pc += KC) {
      const kc = min(KC, K - pc);
      packB(kc, nc, b, ldb, transB, pc, jc, bp, seg, segB);
      const mode = pc > 0 || beta == 1 ? ADD : beta == 0 ? SET : SCALE;
      for (let ic = 0; ic < M; ic += MC) {
        gemmRows(min(MC, M - ic), nc, kc, a, lda, transA, ic, pc, alpha, bp, cj, ldc, mode, beta, ap, tile, seg, segC, jc);
      }
    }
  }
}

/**
 * C[M, N] = A B (beta 0) from operands packed by their producers, the same arithmetic as gemm() on the unpacked
 * ones (bit for bit: the same KC blocks of the reduction, each in k order, the same micro-kernel and edge tiles).
 * A in 4-row panels: row i, column k at ((i / MR) K + k) MR + i % MR (rows past M padding); B in 8-column panels:
 * row k, column j at ((j / NR) K + k) NR + j % NR (columns past N padding, read only into discarded lanes).
 * Winograd's transforms write their operands this way (wasm/winograd.ts), so its GEMMs copy nothing.
 * `tile` is scratch of MR x NR floats.
 */
export function gemmPanels(M: i32, N: i32, K: i32, a: usize, b: usize, c: usize, ldc: i32, tile: usize): void {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scaleC(M, N, c, ldc, 0);
    return;
  }
  for (let pc = 0; pc < K; pc += KC) {
    const kc = min(KC, K - pc);
    const mode = pc > 0 ? ADD : SET;
    for (let ic = 0; ic < M; ic += MC) {
      tiles(min(MC, M - ic), N, kc, a + (<usize>ic * K + <usize>pc * MR) * 4, K, b + <usize>pc * NR * 4, K, c + <usize>ic * ldc * 4, ldc, mode, 0, tile);
    }
  }
}

/**
 * `count` gemmPanels calls in a row, the i-th on a + i aStep, b + i bStep, c + i cStep (byte steps): Winograd's GEMMs,
 * one per position, as one call (one command for a thread instead of one per position).
 */
export function gemmPanelsRun(M: i32, N: i32, K: i32, a: usize, aStep: usize, b: usize, bStep: usize, c: usize, cStep: usize, ldc: i32, tile: usize,
  count: i32): void {
  for (let i = 0; i < count; i++) gemmPanels(M, N, K, a + <usize>i * aStep, b + <usize>i * bStep, c + <usize>i * cStep, ldc, tile);
}

// ---- A B^T of segments, packed (the filter gradient) ---------------------------------------

/** Lanes 0..3 of four vectors as columns: out i is (r0[i], r1[i], r2[i], r3[i]). */
@inline function t4(r0: v128, r1: v128, r2: v128, r3: v128, i: i32): v128 {
  const lo = i < 2;
  const t0 = lo ? v128.shuffle<f32>(r0, r1, 0, 4, 1, 5) : v128.shuffle<f32>(r0, r1, 2, 6, 3, 7);
  const t1 = lo ? v128.shuffle<f32>(r2, r3, 0, 4, 1, 5) : v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
  return (i & 1) == 0 ? v128.shuffle<f32>(t0, t1, 0, 1, 4, 5) : v128.shuffle<f32>(t0, t1, 2, 3, 6, 7);
}

/**
 * Packs rows [r0, r0 + rows) x columns [pc, pc + kc) of a matrix of segments (column k is column k % s of segment k / s,
 * segments `seg` floats apart, rows s floats apart within one) into k-major panels of `width` rows (4: A's, 8: B's; the
 * rows past `rows` zero), panel p at dst + p kc width floats. Four columns at a time are read from each row and
 * transposed where they lie in one segment; the rest one at a time. Copies: the same values wherever they come from.
 */
function packSegRows(rows: i32, kc: i32, m: usize, s: i32, seg: i32, r0: i32, pc: i32, width: i32, dst: usize): void {
  const rowB = <usize>s * 4;
  for (let p = 0; p * width < rows; p++) {
    const pr = min(width, rows - p * width);
    const panel = dst + <usize>(p * kc * width) * 4;
    const first = m + <usize>(r0 + p * width) * rowB;
    let k = 0;
    while (k < kc) {
      const col = pc + k, within = col % s;
      const run = min(s - within, kc - k);
      const src = first + (<usize>(col / s) * seg + within) * 4;
      let t = 0;
      if (pr == width) {
        for (; t + 4 <= run; t += 4) {
          const q = src + <usize>t * 4, d = panel + <usize>((k + t) * width) * 4;
          const a0 = v128.load(q), a1 = v128.load(q + rowB), a2 = v128.load(q + 2 * rowB), a3 = v128.load(q + 3 * rowB);
          if (width == 4) {
            v128.store(d, t4(a0, a1, a2, a3, 0));
            v128.store(d, t4(a0, a1, a2, a3, 1), 16);
            v128.store(d, t4(a0, a1, a2, a3, 2), 32);
            v128.store(d, t4(a0, a1, a2, a3, 3), 48);
          } else {
            const h = q + 4 * rowB;
            const b0 = v128.load(h), b1 = v128.load(h + rowB), b2 = v128.load(h + 2 * rowB), b3 = v128.load(h + 3 * rowB);
            v128.store(d, t4(a0, a1, a2, a3, 0));
            v128.store(d, t4(b0, b1, b2, b3, 0), 16);
            v128.store(d, t4(a0, a1, a2, a3, 1), 32);
            v128.store(d, t4(b0, b1, b2, b3, 1), 48);
            v128.store(d, t4(a0, a1, a2, a3, 2), 64);
            v128.store(d, t4(b0, b1, b2, b3, 2), 80);
            v128.store(d, t4(a0, a1, a2, a3, 3), 96);
            v128.store(d, t4(b0, b1, b2, b3, 3), 112);
          }
        }
      }
      for (; t < run; t++) {
        const d = panel + <usize>((k + t) * width) * 4;
        for (let r = 0; r < width; r++) store<f32>(d + r * 4, r < pr ? load<f32>(src + <usize>r * rowB + <usize>t * 4) : 0);
      }
      k += run;
    }
  }
}

/**
 * C[M, N] = A B^T (C written, never read), with A [M, K] and B [N, K] both made of segments along K: column k of A is
 * column k % sA of segment k / sA (segments segA floats apart, rows sA floats apart within one), and likewise B with sB
 * and segB. That is a convolution's filter gradient dy col^T read where the images lie: A the group's dy (a segment an
 * image: sA its pixels, segA its planes), B x itself for a 1x1 convolution (sB the pixels, segB the image) or the
 * im2col columns (one segment: sB the columns). gemm()'s packed blocks and micro-kernel, every output summed in k order
 * within each KC block and the blocks in order, which depends on K only: any rows of C give the same bits. `scratch`
 * of gemmScratchBytes().
 */
export function gemmSegNT(M: i32, N: i32, K: i32, a: usize, sA: i32, segA: i32, b: usize, sB: i32, segB: i32, c: usize, ldc: i32, scratch: usize): void {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || sA <= 0 || sB <= 0) {
    scaleC(M, N, c, ldc, 0);
    return;
  }
  const bp = scratch;
  const ap = bp + <usize>(KC * NC) * 4;
  const tile = ap + <usize>(MC * KC) * 4;
  for (let jc = 0; jc < N; jc += NC) {
    const nc = min(NC, N - jc);
    for (let pc = 0; pc < K; pc += KC) {
      const kc = min(KC, K - pc);
      packSegRows(nc, kc, b, sB, segB, jc, pc, NR, bp);
      const mode = pc > 0 ? ADD : SET;
      for (let ic = 0; ic < M; ic += MC) {
        const mc = min(MC, M - ic);
        packSegRows(mc, kc, a, sA, segA, ic, pc, MR, ap);
        tiles(mc, nc, kc, ap, kc, bp, kc, c + (<usize>ic * ldc + jc) * 4, ldc, mode, 0, tile);
      }
    }
  }
}

// ---- A B^T by dot products ---------------------------------------------------------------

@inline function hsum(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

@inline function finish(p: usize, s: f32, alpha: f32, beta: f32): void {
  const r = alpha * s;
  store<f32>(p, beta == 0 ? r : beta == 1 ? load<f32>(p) + r : load<f32>(p) * beta + r);
}

/** One output: dot of A's row (a) and B's row (b) over K, same order as the 4x2 kernel. */
function dot1(K: i32, a: usize, b: usize): f32 {
  const K4 = K & ~3;
  let acc = f32x4.splat(0);
  for (let k = 0; k < K4; k += 4) acc = madd(v128.load(a + <usize>k * 4), v128.load(b + <usize>k * 4), acc);
  let s = hsum(acc);
  for (let k = K4; k < K; k++) s += load<f32>(a + <usize>k * 4) * load<f32>(b + <usize>k * 4);
  return s;
}

/**
 * [hsum(x00), hsum(x01), hsum(x10), hsum(x11)]: the four vectors transposed (t4), their lanes added lane-wise as
 * (l0 + l1) + (l2 + l3), hsum's order, so the same bits as four hsums.
 */
@inline function sums2x2(x00: v128, x01: v128, x10: v128, x11: v128): v128 {
  return f32x4.add(f32x4.add(t4(x00, x01, x10, x11, 0), t4(x00, x01, x10, x11, 1)), f32x4.add(t4(x00, x01, x10, x11, 2), t4(x00, x01, x10, x11, 3)));
}

/**
 * A 2x2 block of C at p (rows sc bytes apart) from its sums r = [r00, r01, r10, r11] (rows a0, a1 of A, b0, b1 of B):
 * the K % 4 last products added one k at a time, then alpha and beta, lane by lane as finish() does one value.
 */
@inline function finish2x2(p: usize, sc: usize, r: v128, K4: i32, K: i32, a0: usize, a1: usize, b0: usize, b1: usize, alpha: f32, beta: f32): void {
  for (let k = K4; k < K; k++) {
    const o = <usize>k * 4;
    const u0 = load<f32>(a0 + o), u1 = load<f32>(a1 + o), v0 = load<f32>(b0 + o), v1 = load<f32>(b1 + o);
    r = f32x4.add(r, f32x4.mul(f32x4(u0, u0, u1, u1), f32x4(v0, v1, v0, v1)));
  }
  r = f32x4.mul(f32x4.splat(alpha), r);
  if (beta != 0) {
    const old = v128.load64_lane(p + sc, v128.load64_zero(p), 1);
    r = beta == 1 ? f32x4.add(old, r) : f32x4.add(f32x4.mul(old, f32x4.splat(beta)), r);
  }
  v128.store64_lane(p, r, 0);
  v128.store64_lane(p + sc, r, 1);
}

/** C[M, N] = alpha A B^T + beta C, A [M, K] (lda), B [N, K] (ldb). */
export function gemmNT(M: i32, N: i32, K: i32, a: usize, lda: i32, b: usize, ldb: i32, c: usize, ldc: i32, alpha: f32, beta: f32): void {
  if (M <= 0 || N <= 0) return;
  const K4 = K & ~3;
  const sa = <usize>lda * 4, sb = <usize>ldb * 4, sc = <usize>ldc * 4;
  const M4 = M & ~3, N2 = N & ~1;
  for (let i = 0; i < M4; i += 4) {
    const a0 = a + <usize>i * sa, a1 = a0 + sa, a2 = a1 + sa, a3 = a2 + sa;
    const crow = c + <usize>i * sc;
    for (let j = 0; j < N2; j += 2) {
      const b0 = b + <usize>j * sb, b1 = b0 + sb;
      let s00 = f32x4.splat(0), s01 = f32x4.splat(0);
      let s10 = f32x4.splat(0), s11 = f32x4.splat(0);
      let s20 = f32x4.splat(0), s21 = f32x4.splat(0);
      let s30 = f32x4.splat(0), s31 = f32x4.splat(0);
      for (let k = 0; k < K4; k += 4) {
        const o = <usize>k * 4;
        const v0 = v128.load(b0 + o), v1 = v128.load(b1 + o);
        let u = v128.load(a0 + o);
        s00 = madd(u, v0, s00);
        s01 = madd(u, v1, s01);
        u = v128.load(a1 + o);
        s10 = madd(u, v0, s10);
        s11 = madd(u, v1, s11);
        u = v128.load(a2 + o);
        s20 = madd(u, v0, s20);
        s21 = madd(u, v1, s21);
        u = v128.load(a3 + o);
        s30 = madd(u, v0, s30);
        s31 = madd(u, v1, s31);
      }
      const p = crow + <usize>j * 4;
      finish2x2(p, sc, sums2x2(s00, s01, s10, s11), K4, K, a0, a1, b0, b1, alpha, beta);
      finish2x2(p + 2 * sc, sc, sums2x2(s20, s21, s30, s31), K4, K, a2, a3, b0, b1, alpha, beta);
    }
  }
  // Edges: the last column when N is odd, and the last M % 4 rows.
  for (let i = 0; i < M; i++) {
    const j0 = i < M4 ? N2 : 0;
    for (let j = j0; j < N; j++) finish(c + <usize>i * sc + <usize>j * 4, dot1(K, a + <usize>i * sa, b + <usize>j * sb), alpha, beta);
  }
}

/** `count` gemmNT calls in a row, the i-th on a + i aStep, b + i bStep, c + i cStep (byte steps): one command for a thread. */
export function gemmNTRun(M: i32, N: i32, K: i32, a: usize, lda: i32, b: usize, ldb: i32, c: usize, ldc: i32, alpha: f32, beta: f32,
  aStep: usize, bStep: usize, cStep: usize, count: i32): void {
  for (let i = 0; i < count; i++) gemmNT(M, N, K, a + <usize>i * aStep, lda, b + <usize>i * bStep, ldb, c + <usize>i * cStep, ldc, alpha, beta);
}
