// Winograd F(4x4, 3x3) transforms for 3x3 stride-1 convolutions (src/wasm/ops-winograd.ts drives
// them; wasm/winograd.ts has F(2x2, 3x3), whose layouts these follow). An output tile of 4x4 comes
// from a 6x6 input tile d (rows 4ty - ph .., columns 4tx - pw ..), with the points 0, 1, -1, 2, -2, inf:
//   y = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) elementwise over the 36 positions xi = 6i + j
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Summed over input channels that is 36 GEMMs of Cout x Cin per tile of 16 outputs: 2.25 multiply-adds an output
// and channel pair, where F(2x2, 3x3) needs 4 and the direct convolution 9. The filter gradient is the adjoint:
// dU_xi = sum over tiles of (A dy A^T)_xi (B^T d B)_xi, then dg = G^T dU G. The filter's transforms (once per pass,
// per channel pair) run in float64 and round once: G's sixths and twenty-fourths are not exact in float32. The
// tiles' transforms multiply only by 2, 4, 5 and 8, in float32.
// Layouts as in wasm/winograd.ts with 36 positions: U [36][rows][cols] (4-row panels), V [36][C][ldT] (rows or
// 8-column panels), M [36][C][ldT], except that the positions' planes are `xiStride` bytes apart, which the caller
// chooses (src/wasm/ops-winograd.ts pads them so that the 36 planes do not share cache sets). Every value is
// computed in one fixed order (no sums across threads).

import { padPlane } from './winograd';

const X: i32 = 36;
/** 1/6 rounded to float64 (the transforms' sixths are products with it: cheaper than divisions, and as fixed). */
const SIXTH: f64 = 1.0 / 6.0;

/**
 * U [36][R][C] = G g G^T for every filter g = w[co][ci] (3x3), R x C = cout x cin; turned: cin x cout from g flipped 180 degrees
 * (the input gradient's filter). Each position's matrix is in gemmPanels' 4-row panels (row r, column k at
 * ((r / 4) C + k) 4 + r % 4), position xi's at u + xi plane; this call writes panels [b0, b1), the rows past R zero. Four rows
 * at once, as two float64 pairs: every value the same as one filter at a time, and each panel written whole by one call (a
 * thread's share).
 */
export function wg4Filter(w: usize, cout: i32, cin: i32, u: usize, turned: bool, plane: usize, b0: i32, b1: i32): void {
  const R = turned ? cin : cout, C = turned ? cout : cin;
  const f = turned ? 8 : 0, s = turned ? -1 : 1;
  // Filter (row r, column k) at w + 36 (r cin + k), turned at w + 36 (k cin + r).
  const rowStep = <usize>(turned ? 36 : 36 * cin), colStep = <usize>(turned ? 36 * cin : 36);
  for (let b = b0; b < b1; b++) {
    const r0 = b * 4, n = min(4, R - r0);
    // Lanes past R read the last row again and are masked to +0.
    const mask = i32x4.lt_s(i32x4(0, 1, 2, 3), i32x4.splat(n));
    const g0 = w + <usize>r0 * rowStep, g1 = w + <usize>(r0 + min(1, n - 1)) * rowStep;
    const g2 = w + <usize>(r0 + min(2, n - 1)) * rowStep, g3 = w + <usize>(r0 + min(3, n - 1)) * rowStep;
    let dst = u + <usize>(b * C) * 16;
    for (let k = 0; k < C; k++) {
      const o = <usize>k * colStep;
      filter4(g0 + o, g1 + o, g2 + o, g3 + o, f, s, dst, plane, mask);
      dst += 16;
    }
  }
}

/** The 36 values of four filters (at g0 .. g3) into lanes 0..3 of each position's 4 floats at dst (`plane` apart). */
@inline function filter4(g0: usize, g1: usize, g2: usize, g3: usize, f: i32, s: i32, dst: usize, plane: usize, mask: v128): void {
  // Columns a, b, c of rows 0..2, filters 0-1 (l) and 2-3 (h).
  const a0l = ld2(g0, g1, f, s, 0), a1l = ld2(g0, g1, f, s, 3), a2l = ld2(g0, g1, f, s, 6);
  const b0l = ld2(g0, g1, f, s, 1), b1l = ld2(g0, g1, f, s, 4), b2l = ld2(g0, g1, f, s, 7);
  const c0l = ld2(g0, g1, f, s, 2), c1l = ld2(g0, g1, f, s, 5), c2l = ld2(g0, g1, f, s, 8);
  const a0h = ld2(g2, g3, f, s, 0), a1h = ld2(g2, g3, f, s, 3), a2h = ld2(g2, g3, f, s, 6);
  const b0h = ld2(g2, g3, f, s, 1), b1h = ld2(g2, g3, f, s, 4), b2h = ld2(g2, g3, f, s, 7);
  const c0h = ld2(g2, g3, f, s, 2), c1h = ld2(g2, g3, f, s, 5), c2h = ld2(g2, g3, f, s, 8);
  // Row i of G g, then times G^T: positions 6i .. 6i + 5.
  row6x4(dst, plane, mask, gT2(a0l, a1l, a2l, 0), gT2(b0l, b1l, b2l, 0), gT2(c0l, c1l, c2l, 0),
    gT2(a0h, a1h, a2h, 0), gT2(b0h, b1h, b2h, 0), gT2(c0h, c1h, c2h, 0));
  row6x4(dst + 6 * plane, plane, mask, gT2(a0l, a1l, a2l, 1), gT2(b0l, b1l, b2l, 1), gT2(c0l, c1l, c2l, 1),
    gT2(a0h, a1h, a2h, 1), gT2(b0h, b1h, b2h, 1), gT2(c0h, c1h, c2h, 1));
  row6x4(dst + 12 * plane, plane, mask, gT2(a0l, a1l, a2l, 2), gT2(b0l, b1l, b2l, 2), gT2(c0l, c1l, c2l, 2),
    gT2(a0h, a1h, a2h, 2), gT2(b0h, b1h, b2h, 2), gT2(c0h, c1h, c2h, 2));
  row6x4(dst + 18 * plane, plane, mask, gT2(a0l, a1l, a2l, 3), gT2(b0l, b1l, b2l, 3), gT2(c0l, c1l, c2l, 3),
    gT2(a0h, a1h, a2h, 3), gT2(b0h, b1h, b2h, 3), gT2(c0h, c1h, c2h, 3));
  row6x4(dst + 24 * plane, plane, mask, gT2(a0l, a1l, a2l, 4), gT2(b0l, b1l, b2l, 4), gT2(c0l, c1l, c2l, 4),
    gT2(a0h, a1h, a2h, 4), gT2(b0h, b1h, b2h, 4), gT2(c0h, c1h, c2h, 4));
  row6x4(dst + 30 * plane, plane, mask, gT2(a0l, a1l, a2l, 5), gT2(b0l, b1l, b2l, 5), gT2(c0l, c1l, c2l, 5),
    gT2(a0h, a1h, a2h, 5), gT2(b0h, b1h, b2h, 5), gT2(c0h, c1h, c2h, 5));
}

/** (p0, p1, p2) G^T for filters 0-1 (l) and 2-3 (h): 6 positions' 4 floats (rounded once, masked) at o, o + plane, ... */
@inline function row6x4(o: usize, plane: usize, mask: v128, l0: v128, l1: v128, l2: v128, h0: v128, h1: v128, h2: v128): void {
  store4(o, mask, gT2(l0, l1, l2, 0), gT2(h0, h1, h2, 0));
  store4(o + plane, mask, gT2(l0, l1, l2, 1), gT2(h0, h1, h2, 1));
  store4(o + 2 * plane, mask, gT2(l0, l1, l2, 2), gT2(h0, h1, h2, 2));
  store4(o + 3 * plane, mask, gT2(l0, l1, l2, 3), gT2(h0, h1, h2, 3));
  store4(o + 4 * plane, mask, gT2(l0, l1, l2, 4), gT2(h0, h1, h2, 4));
  store4(o + 5 * plane, mask, gT2(l0, l1, l2, 5), gT2(h0, h1, h2, 5));
}

/** Two float64 pairs rounded to float32, as one vector (lanes of lo, then of hi), masked. */
@inline function store4(o: usize, mask: v128, lo: v128, hi: v128): void {
  v128.store(o, v128.and(f32x4.shuffle(f32x4.demote_f64x2_zero(lo), f32x4.demote_f64x2_zero(hi), 0, 1, 4, 5), mask));
}

/** Filter value q of the filters at g0 and g1 as a float64 pair, read at f + s q (flipped: f 8, s -1). */
@inline function ld2(g0: usize, g1: usize, f: i32, s: i32, q: i32): v128 {
  const at = <usize>(f + s * q) * 4;
  return f64x2.replace_lane(f64x2.splat(<f64>load<f32>(g0 + at)), 1, <f64>load<f32>(g1 + at));
}

/** Value i of G (a, b, c)^T, the filter's transform along one axis, on float64 pairs (each lane as if alone). */
@inline function gT2(a: v128, b: v128, c: v128, i: i32): v128 {
  const q = f64x2.splat(0.25), h = f64x2.splat(0.5), six = f64x2.splat(SIXTH);
  if (i == 0) return f64x2.mul(a, q);
  if (i == 1) return f64x2.mul(f64x2.neg(f64x2.add(f64x2.add(a, b), c)), six);
  if (i == 2) return f64x2.mul(f64x2.neg(f64x2.add(f64x2.sub(a, b), c)), six);
  if (i == 3) return f64x2.mul(f64x2.add(f64x2.add(f64x2.mul(a, q), f64x2.mul(b, h)), c), six);
  if (i == 4) return f64x2.mul(f64x2.add(f64x2.sub(f64x2.mul(a, q), f64x2.mul(b, h)), c), six);
  return c;
}

/**
 * Bytes of one part's transform scratch for images of th x tw tiles: what wg4Input needs (the padded plane, its
 * vertical transform, 36 vectors), and at least what wg4Output, wg4GradOut and wg4FilterGrad use from its start (each
 * runs after the input transform it follows has finished with the block).
 */
export function wg4ScratchBytes(th: i32, tw: i32): i32 {
  const input = (4 * th + 2 + 6 * th) * rowWidth(tw) * 4 + X * 16;
  return max(input, max(OUTPUT_SCRATCH_BYTES, max(GRAD_SCRATCH_BYTES, FILTER_GRAD_SCRATCH_BYTES)));
}

/** Row width (floats) of the padded plane: the 4 tw + 2 columns tiles read, rounded up to vectors, plus 4 more (a last tile's second load). */
@inline function rowWidth(tw: i32): i32 {
  return ((4 * tw + 2 + 3) & ~3) + 4;
}

/** Writes B^T (d0 .. d5) at o, o + stride, ... (6 vectors). */
@inline function bT(o: usize, stride: usize, d0: v128, d1: v128, d2: v128, d3: v128, d4: v128, d5: v128): void {
  const four = f32x4.splat(4), five = f32x4.splat(5), two = f32x4.splat(2);
  const a = f32x4.sub(d4, d2), b = f32x4.mul(two, f32x4.sub(d3, d1));
  v128.store(o, f32x4.sub(f32x4.add(f32x4.mul(four, d0), d4), f32x4.mul(five, d2)));
  v128.store(o + stride, f32x4.sub(f32x4.add(d3, d4), f32x4.mul(four, f32x4.add(d1, d2))));
  v128.store(o + 2 * stride, f32x4.add(f32x4.sub(d4, d3), f32x4.mul(four, f32x4.sub(d1, d2))));
  v128.store(o + 3 * stride, f32x4.add(a, b));
  v128.store(o + 4 * stride, f32x4.sub(a, b));
  v128.store(o + 5 * stride, f32x4.sub(f32x4.add(f32x4.mul(four, d1), d5), f32x4.mul(five, d3)));
}

/** Byte offset of channel c, tile t within one xi's V: rows [c][ldT], or 8-column panels. */
@inline function vSlot(c: i32, t: i32, ldT: i32, chans: i32, panels: bool): usize {
  return (panels ? <usize>(((t >> 3) * chans + c) * 8 + (t & 7)) : <usize>c * ldT + t) * 4;
}

/** Where tile u's 6 transformed rows start in `tmp` (6 rows of rowB bytes per tile row); tiles past `per` read tile 0's. */
@inline function tileAt(tmp: usize, rowB: usize, u: i32, per: i32, tw: i32): usize {
  if (u >= per) return tmp;
  const ty = u / tw;
  return tmp + <usize>(6 * ty) * rowB + <usize>(4 * (u - ty * tw)) * 4;
}

/**
 * B^T d B of the 4 tiles whose vertically transformed rows start at s0 .. s3 (lanes), all 36 positions from o (stride
 * apart): per row, each tile's 6 columns as two loads (columns 0-3 and 2-5), transposed into the lanes.
 */
@inline function inTiles(o: usize, stride: usize, rowB: usize, s0: usize, s1: usize, s2: usize, s3: usize): void {
  for (let i = 0; i < 6; i++) {
    const q = <usize>i * rowB;
    const l0 = v128.load(s0 + q), l1 = v128.load(s1 + q), l2 = v128.load(s2 + q), l3 = v128.load(s3 + q);
    const m0 = v128.load(s0 + q, 8), m1 = v128.load(s1 + q, 8), m2 = v128.load(s2 + q, 8), m3 = v128.load(s3 + q, 8);
    const a0 = f32x4.shuffle(l0, l1, 0, 4, 1, 5), a1 = f32x4.shuffle(l2, l3, 0, 4, 1, 5);
    const a2 = f32x4.shuffle(l0, l1, 2, 6, 3, 7), a3 = f32x4.shuffle(l2, l3, 2, 6, 3, 7);
    const b2 = f32x4.shuffle(m0, m1, 2, 6, 3, 7), b3 = f32x4.shuffle(m2, m3, 2, 6, 3, 7);
    bT(o + <usize>(6 * i) * stride, stride,
      f32x4.shuffle(a0, a1, 0, 1, 4, 5), f32x4.shuffle(a0, a1, 2, 3, 6, 7), f32x4.shuffle(a2, a3, 0, 1, 4, 5), f32x4.shuffle(a2, a3, 2, 3, 6, 7),
      f32x4.shuffle(b2, b3, 0, 1, 4, 5), f32x4.shuffle(b2, b3, 2, 3, 6, 7));
  }
}

/**
 * V[xi][c][t0 + ty*tw + tx] (row stride ldT) = (B^T d B)_xi for every channel c in [c0, c1) of one image x [C, h, w]
 * (6x6 input tiles at rows 4ty - ph, columns 4tx - pw; zero outside). `pad` is scratch of wg4ScratchBytes.
 * `panels`: V in gemmPanels' B layout (8-column panels, as wgInput's). B^T runs down the padded plane's columns first
 * (every tile row), then B along the rows of any 4 consecutive tiles together (small maps have few tiles a row); 4
 * tiles that cross into the next panel, or an image's last tiles when fewer than 4, go through 36 vectors of scratch.
 */
export function wg4Input(x: usize, c0: i32, c1: i32, h: i32, w: i32, ph: i32, pw: i32, th: i32, tw: i32, v: usize, ldT: i32, chans: i32,
  t0: i32, pad: usize, panels: bool, xiStride: usize): void {
  const W = rowWidth(tw), rows = 4 * th + 2, per = th * tw;
  const rowB = <usize>W * 4;
  const tmp = pad + <usize>rows * rowB; // 6 th rows: the vertical transform of every tile row
  const lanes = tmp + <usize>(6 * th) * rowB;
  for (let c = c0; c < c1; c++) {
    padPlane(pad, rows, rowB, x + <usize>c * h * w * 4, h, w, ph, pw, 4 * tw + 2, c == c0);
    for (let ty = 0; ty < th; ty++) {
      const r0 = pad + <usize>(4 * ty) * rowB, t = tmp + <usize>(6 * ty) * rowB;
      for (let q = 0; q < W; q += 4) {
        const o = r0 + <usize>q * 4;
        bT(t + <usize>q * 4, rowB, v128.load(o), v128.load(o + rowB), v128.load(o + 2 * rowB), v128.load(o + 3 * rowB),
          v128.load(o + 4 * rowB), v128.load(o + 5 * rowB));
      }
    }
    for (let u = 0; u < per; u += 4) {
      const s0 = tileAt(tmp, rowB, u, per, tw), s1 = tileAt(tmp, rowB, u + 1, per, tw);
      const s2 = tileAt(tmp, rowB, u + 2, per, tw), s3 = tileAt(tmp, rowB, u + 3, per, tw);
      const t = t0 + u;
      if (u + 4 <= per && (!panels || (t & 7) <= 4)) {
        inTiles(v + vSlot(c, t, ldT, chans, panels), xiStride, rowB, s0, s1, s2, s3);
        continue;
      }
      inTiles(lanes, 16, rowB, s0, s1, s2, s3);
      for (let k = 0; k < 4 && u + k < per; k++) {
        const o = v + vSlot(c, t + k, ldT, chans, panels), l = lanes + <usize>k * 4;
        for (let xi = 0; xi < X; xi++) store<f32>(o + <usize>xi * xiStride, load<f32>(l + <usize>xi * 16));
      }
    }
  }
}

/** Row r of A^T (m0 .. m5): the output transform along one axis. */
@inline function aT(m0: v128, m1: v128, m2: v128, m3: v128, m4: v128, m5: v128, r: i32): v128 {
  if (r == 0) return f32x4.add(f32x4.add(m0, f32x4.add(m1, m2)), f32x4.add(m3, m4));
  if (r == 1) return f32x4.add(f32x4.sub(m1, m2), f32x4.mul(f32x4.splat(2), f32x4.sub(m3, m4)));
  if (r == 2) return f32x4.add(f32x4.add(m1, m2), f32x4.mul(f32x4.splat(4), f32x4.add(m3, m4)));
  return f32x4.add(f32x4.add(f32x4.sub(m1, m2), f32x4.mul(f32x4.splat(8), f32x4.sub(m3, m4))), m5);
}

/** Where one tile's outputs go: its first output's address, and how many of its rows and columns lie inside the map. */
@unmanaged class Dest {
  at: usize = 0;
  rows: i32 = 0;
  cols: i32 = 0;
}

/** Stores row r of one tile (4 values) at its place, or the part of it inside the map. */
@inline function storeRow(d: Dest, owB: usize, r: i32, v: v128, accumulate: bool): void {
  if (r >= d.rows) return;
  const o = d.at + <usize>r * owB;
  if (d.cols == 4) {
    v128.store(o, accumulate ? f32x4.add(v128.load(o), v) : v);
    return;
  }
  storeLane(o, f32x4.extract_lane(v, 0), accumulate);
  if (d.cols > 1) storeLane(o + 4, f32x4.extract_lane(v, 1), accumulate);
  if (d.cols > 2) storeLane(o + 8, f32x4.extract_lane(v, 2), accumulate);
}

@inline function storeLane(o: usize, v: f32, accumulate: bool): void {
  store<f32>(o, accumulate ? load<f32>(o) + v : v);
}

/** Row i of M A (4 vectors at h + 16 (4i + c)) for the tiles in the lanes of M at p: each of M's values is read once. */
@inline function rowA(p: usize, xiStride: usize, i: i32, h: usize): void {
  const q = p + <usize>(6 * i) * xiStride;
  const m0 = v128.load(q), m1 = v128.load(q + xiStride), m2 = v128.load(q + 2 * xiStride);
  const m3 = v128.load(q + 3 * xiStride), m4 = v128.load(q + 4 * xiStride), m5 = v128.load(q + 5 * xiStride);
  const o = h + <usize>(64 * i);
  v128.store(o, aT(m0, m1, m2, m3, m4, m5, 0));
  v128.store(o, aT(m0, m1, m2, m3, m4, m5, 1), 16);
  v128.store(o, aT(m0, m1, m2, m3, m4, m5, 2), 32);
  v128.store(o, aT(m0, m1, m2, m3, m4, m5, 3), 48);
}

/** Row r of 4 edge tiles' outputs (lanes = tiles, at y + 64 r), transposed, each stored where its Dest says. */
@inline function edgeRows(y: usize, r: i32, owB: usize, d0: Dest, d1: Dest, d2: Dest, d3: Dest, accumulate: bool): void {
  const q = y + <usize>(64 * r);
  const y0 = v128.load(q), y1 = v128.load(q, 16), y2 = v128.load(q, 32), y3 = v128.load(q, 48);
  const a0 = f32x4.shuffle(y0, y1, 0, 4, 1, 5), a1 = f32x4.shuffle(y2, y3, 0, 4, 1, 5);
  const a2 = f32x4.shuffle(y0, y1, 2, 6, 3, 7), a3 = f32x4.shuffle(y2, y3, 2, 6, 3, 7);
  storeRow(d0, owB, r, f32x4.shuffle(a0, a1, 0, 1, 4, 5), accumulate);
  storeRow(d1, owB, r, f32x4.shuffle(a0, a1, 2, 3, 6, 7), accumulate);
  storeRow(d2, owB, r, f32x4.shuffle(a2, a3, 0, 1, 4, 5), accumulate);
  storeRow(d3, owB, r, f32x4.shuffle(a2, a3, 2, 3, 6, 7), accumulate);
}

/** Row r of the 4 tiles' outputs, column by column (y_c: lanes = tiles), transposed to each tile's row and stored at a_k + o. */
@inline function storeRows4(y0: v128, y1: v128, y2: v128, y3: v128, o: usize, a0: usize, a1: usize, a2: usize, a3: usize, accumulate: bool): void {
  const b0 = f32x4.shuffle(y0, y1, 0, 4, 1, 5), b1 = f32x4.shuffle(y2, y3, 0, 4, 1, 5);
  const b2 = f32x4.shuffle(y0, y1, 2, 6, 3, 7), b3 = f32x4.shuffle(y2, y3, 2, 6, 3, 7);
  storeVec(a0 + o, f32x4.shuffle(b0, b1, 0, 1, 4, 5), accumulate);
  storeVec(a1 + o, f32x4.shuffle(b0, b1, 2, 3, 6, 7), accumulate);
  storeVec(a2 + o, f32x4.shuffle(b2, b3, 0, 1, 4, 5), accumulate);
  storeVec(a3 + o, f32x4.shuffle(b2, b3, 2, 3, 6, 7), accumulate);
}

@inline function storeVec(o: usize, v: v128, accumulate: bool): void {
  v128.store(o, accumulate ? f32x4.add(v128.load(o), v) : v);
}

/** Column c of M A (its 6 rows at h) through A^T: the 4 outputs of column c, rows 0 .. 3, into y (4 vectors). */
@inline function colOut(h: usize, c: i32, y: usize): void {
  const o = h + <usize>(16 * c);
  const m0 = v128.load(o), m1 = v128.load(o, 64), m2 = v128.load(o, 128), m3 = v128.load(o, 192), m4 = v128.load(o, 256), m5 = v128.load(o, 320);
  v128.store(y, aT(m0, m1, m2, m3, m4, m5, 0));
  v128.store(y, aT(m0, m1, m2, m3, m4, m5, 1), 64);
  v128.store(y, aT(m0, m1, m2, m3, m4, m5, 2), 128);
  v128.store(y, aT(m0, m1, m2, m3, m4, m5, 3), 192);
}

/** The outputs of the 4 tiles in the lanes of M at p: M A into h (24 vectors), then A^T (M A) into y (16: row r at y + 64 r). */
@inline function tilesOut(p: usize, xiStride: usize, h: usize, y: usize): void {
  rowA(p, xiStride, 0, h);
  rowA(p, xiStride, 1, h);
  rowA(p, xiStride, 2, h);
  rowA(p, xiStride, 3, h);
  rowA(p, xiStride, 4, h);
  rowA(p, xiStride, 5, h);
  colOut(h, 0, y);
  colOut(h, 1, y + 16);
  colOut(h, 2, y + 32);
  colOut(h, 3, y + 48);
}

/** Stores the 16 outputs (y) of 4 whole tiles at a0 .. a3, `accumulate` a constant. */
@inline function wholeTiles(y: usize, owB: usize, a0: usize, a1: usize, a2: usize, a3: usize, accumulate: bool): void {
  for (let r = 0; r < 4; r++) {
    const q = y + <usize>(64 * r);
    storeRows4(v128.load(q), v128.load(q, 16), v128.load(q, 32), v128.load(q, 48), <usize>r * owB, a0, a1, a2, a3, accumulate);
  }
}

/** The first output of tile u of an image in plane yc. */
@inline function tileOut(yc: usize, u: i32, tw: i32, ow: i32): usize {
  const ty = u / tw;
  return yc + (<usize>(4 * ty) * ow + <usize>(4 * (u - ty * tw))) * 4;
}

/** Tile u of an image (tw tiles a row, `per` in all) of channel plane yc: where its outputs go (no rows past the last tile). */
@inline function dest(d: Dest, u: i32, per: i32, tw: i32, oh: i32, ow: i32, yc: usize): void {
  if (u >= per) {
    d.rows = 0;
    return;
  }
  const ty = u / tw, tx = u - ty * tw;
  d.at = yc + (<usize>(4 * ty) * ow + <usize>(4 * tx)) * 4;
  d.rows = min(4, oh - 4 * ty);
  d.cols = min(4, ow - 4 * tx);
}

/** wg4Output's scratch: 4 Dest records, M A of 4 tiles (24 vectors), their outputs (16 vectors). */
const DEST_BYTES: usize = 16;
const OUTPUT_SCRATCH_BYTES: i32 = 4 * 16 + 24 * 16 + 16 * 16;

/**
 * y[c][4ty + i][4tx + j] (=, or += when `accumulate`) = (A^T M A)_ij for channels [c0, c1) of one image y [C, oh, ow],
 * M[xi][c][t0 + ty*tw + tx] (row stride ldT, `chans` rows per xi). Any 4 consecutive tiles of the image go through
 * the vector lanes together (small maps have few tiles a row), so M is read up to 3 tiles past the image's last: its
 * buffer has 16 bytes more. `scratch`: of wg4ScratchBytes (OUTPUT_SCRATCH_BYTES used).
 */
export function wg4Output(m: usize, c0: i32, c1: i32, oh: i32, ow: i32, th: i32, tw: i32, ldT: i32, chans: i32, t0: i32, y: usize,
  accumulate: bool, scratch: usize, xiStride: usize): void {
  const owB = <usize>ow * 4;
  const per = th * tw;
  const d0 = changetype<Dest>(scratch), d1 = changetype<Dest>(scratch + DEST_BYTES);
  const d2 = changetype<Dest>(scratch + 2 * DEST_BYTES), d3 = changetype<Dest>(scratch + 3 * DEST_BYTES);
  const h = scratch + 4 * DEST_BYTES, out = h + 24 * 16;
  const whole = (oh & 3) == 0 && (ow & 3) == 0; // every tile inside the map
  for (let c = c0; c < c1; c++) {
    const mc = m + (<usize>c * ldT + t0) * 4;
    const yc = y + <usize>c * oh * ow * 4;
    for (let u = 0; u < per; u += 4) {
      tilesOut(mc + <usize>u * 4, xiStride, h, out);
      if (whole && u + 4 <= per) {
        const a0 = tileOut(yc, u, tw, ow), a1 = tileOut(yc, u + 1, tw, ow), a2 = tileOut(yc, u + 2, tw, ow), a3 = tileOut(yc, u + 3, tw, ow);
        if (accumulate) wholeTiles(out, owB, a0, a1, a2, a3, true);
        else wholeTiles(out, owB, a0, a1, a2, a3, false);
        continue;
      }
      dest(d0, u, per, tw, oh, ow, yc);
      dest(d1, u + 1, per, tw, oh, ow, yc);
      dest(d2, u + 2, per, tw, oh, ow, yc);
      dest(d3, u + 3, per, tw, oh, ow, yc);
      for (let r = 0; r < 4; r++) edgeRows(out, r, owB, d0, d1, d2, d3, accumulate);
    }
  }
}

/** Row i of A (g0 .. g3): the filter gradient's transform of dy along one axis. */
@inline function aCol(g0: v128, g1: v128, g2: v128, g3: v128, i: i32): v128 {
  if (i == 0) return g0;
  if (i == 1) return f32x4.add(f32x4.add(g0, g2), f32x4.add(g1, g3));
  if (i == 2) return f32x4.sub(f32x4.add(g0, g2), f32x4.add(g1, g3));
  if (i == 3) return f32x4.add(f32x4.add(g0, f32x4.mul(f32x4.splat(4), g2)), f32x4.add(f32x4.mul(f32x4.splat(2), g1), f32x4.mul(f32x4.splat(8), g3)));
  if (i == 4) return f32x4.sub(f32x4.add(g0, f32x4.mul(f32x4.splat(4), g2)), f32x4.add(f32x4.mul(f32x4.splat(2), g1), f32x4.mul(f32x4.splat(8), g3)));
  return g3;
}

/** Row i of A g A^T (6 values at p + j xiStride) from the tile's rows g_r = (g_r0 .. g_r3), lanes = tiles. */
@inline function gradRow(p: usize, xiStride: usize, i: i32, g00: v128, g01: v128, g02: v128, g03: v128, g10: v128, g11: v128, g12: v128,
  g13: v128, g20: v128, g21: v128, g22: v128, g23: v128, g30: v128, g31: v128, g32: v128, g33: v128): void {
  const a0 = aCol(g00, g10, g20, g30, i), a1 = aCol(g01, g11, g21, g31, i), a2 = aCol(g02, g12, g22, g32, i), a3 = aCol(g03, g13, g23, g33, i);
  v128.store(p, aCol(a0, a1, a2, a3, 0));
  v128.store(p + xiStride, aCol(a0, a1, a2, a3, 1));
  v128.store(p + 2 * xiStride, aCol(a0, a1, a2, a3, 2));
  v128.store(p + 3 * xiStride, aCol(a0, a1, a2, a3, 3));
  v128.store(p + 4 * xiStride, aCol(a0, a1, a2, a3, 4));
  v128.store(p + 5 * xiStride, aCol(a0, a1, a2, a3, 5));
}

/** A g A^T of the tiles in the lanes (tile k's row r, column c: lane k of g_rc), all 36 positions from p. */
@inline function gradTile(p: usize, xiStride: usize, g00: v128, g01: v128, g02: v128, g03: v128, g10: v128, g11: v128, g12: v128,
  g13: v128, g20: v128, g21: v128, g22: v128, g23: v128, g30: v128, g31: v128, g32: v128, g33: v128): void {
  const s6 = 6 * xiStride;
  gradRow(p, xiStride, 0, g00, g01, g02, g03, g10, g11, g12, g13, g20, g21, g22, g23, g30, g31, g32, g33);
  gradRow(p + s6, xiStride, 1, g00, g01, g02, g03, g10, g11, g12, g13, g20, g21, g22, g23, g30, g31, g32, g33);
  gradRow(p + 2 * s6, xiStride, 2, g00, g01, g02, g03, g10, g11, g12, g13, g20, g21, g22, g23, g30, g31, g32, g33);
  gradRow(p + 3 * s6, xiStride, 3, g00, g01, g02, g03, g10, g11, g12, g13, g20, g21, g22, g23, g30, g31, g32, g33);
  gradRow(p + 4 * s6, xiStride, 4, g00, g01, g02, g03, g10, g11, g12, g13, g20, g21, g22, g23, g30, g31, g32, g33);
  gradRow(p + 5 * s6, xiStride, 5, g00, g01, g02, g03, g10, g11, g12, g13, g20, g21, g22, g23, g30, g31, g32, g33);
}

/** Row r of 4 whole tiles from dy at d (16 floats), transposed: lane k of column c is tile k's value. */
@inline function tr(v0: v128, v1: v128, v2: v128, v3: v128, c: i32): v128 {
  const a = c < 2 ? f32x4.shuffle(v0, v1, 0, 4, 1, 5) : f32x4.shuffle(v0, v1, 2, 6, 3, 7);
  const b = c < 2 ? f32x4.shuffle(v2, v3, 0, 4, 1, 5) : f32x4.shuffle(v2, v3, 2, 6, 3, 7);
  return (c & 1) == 0 ? f32x4.shuffle(a, b, 0, 1, 4, 5) : f32x4.shuffle(a, b, 2, 3, 6, 7);
}

/** Row r of one tile of dy (4 values; zero outside the map). */
@inline function loadRow(d: Dest, owB: usize, r: i32): v128 {
  if (r >= d.rows) return f32x4.splat(0);
  const o = d.at + <usize>r * owB;
  if (d.cols == 4) return v128.load(o);
  let v = f32x4.splat(0);
  v = f32x4.replace_lane(v, 0, load<f32>(o));
  if (d.cols > 1) v = f32x4.replace_lane(v, 1, load<f32>(o, 4));
  if (d.cols > 2) v = f32x4.replace_lane(v, 2, load<f32>(o, 8));
  return v;
}

/** A g A^T of the 4 tiles of dy in d0 .. d3 (lanes), all 36 positions from p (xiStride apart). */
@inline function gradTiles(p: usize, xiStride: usize, owB: usize, d0: Dest, d1: Dest, d2: Dest, d3: Dest): void {
  const a0 = loadRow(d0, owB, 0), a1 = loadRow(d1, owB, 0), a2 = loadRow(d2, owB, 0), a3 = loadRow(d3, owB, 0);
  const b0 = loadRow(d0, owB, 1), b1 = loadRow(d1, owB, 1), b2 = loadRow(d2, owB, 1), b3 = loadRow(d3, owB, 1);
  const e0 = loadRow(d0, owB, 2), e1 = loadRow(d1, owB, 2), e2 = loadRow(d2, owB, 2), e3 = loadRow(d3, owB, 2);
  const f0 = loadRow(d0, owB, 3), f1 = loadRow(d1, owB, 3), f2 = loadRow(d2, owB, 3), f3 = loadRow(d3, owB, 3);
  gradTile(p, xiStride,
    tr(a0, a1, a2, a3, 0), tr(a0, a1, a2, a3, 1), tr(a0, a1, a2, a3, 2), tr(a0, a1, a2, a3, 3),
    tr(b0, b1, b2, b3, 0), tr(b0, b1, b2, b3, 1), tr(b0, b1, b2, b3, 2), tr(b0, b1, b2, b3, 3),
    tr(e0, e1, e2, e3, 0), tr(e0, e1, e2, e3, 1), tr(e0, e1, e2, e3, 2), tr(e0, e1, e2, e3, 3),
    tr(f0, f1, f2, f3, 0), tr(f0, f1, f2, f3, 1), tr(f0, f1, f2, f3, 2), tr(f0, f1, f2, f3, 3));
}

/** wg4GradOut's scratch: 4 Dest records, then 36 vectors (the last tiles of an image, when fewer than 4). */
const GRAD_SCRATCH_BYTES: i32 = 4 * 16 + 36 * 16;

/**
 * G[xi][c][t0 + ty*tw + tx] (row stride ldT) = (A g A^T)_xi for channels [c0, c1) of one image's output gradient
 * dy [C, oh, ow], g its 4x4 tile at (4ty, 4tx) (zero outside): the filter gradient's transform of dy. Any 4
 * consecutive tiles of the image go through the lanes together; an image's last tiles, when fewer than 4, through
 * `scratch` (of wg4ScratchBytes: GRAD_SCRATCH_BYTES used), so nothing is written past them.
 */
export function wg4GradOut(dy: usize, c0: i32, c1: i32, oh: i32, ow: i32, th: i32, tw: i32, g: usize, ldT: i32, chans: i32, t0: i32,
  scratch: usize, xiStride: usize): void {
  const owB = <usize>ow * 4;
  const per = th * tw;
  const d0 = changetype<Dest>(scratch), d1 = changetype<Dest>(scratch + DEST_BYTES);
  const d2 = changetype<Dest>(scratch + 2 * DEST_BYTES), d3 = changetype<Dest>(scratch + 3 * DEST_BYTES);
  const tail = scratch + 4 * DEST_BYTES;
  for (let c = c0; c < c1; c++) {
    const gc = g + (<usize>c * ldT + t0) * 4;
    const dc = dy + <usize>c * oh * ow * 4;
    for (let u = 0; u < per; u += 4) {
      dest(d0, u, per, tw, oh, ow, dc);
      dest(d1, u + 1, per, tw, oh, ow, dc);
      dest(d2, u + 2, per, tw, oh, ow, dc);
      dest(d3, u + 3, per, tw, oh, ow, dc);
      if (u + 4 <= per) {
        gradTiles(gc + <usize>u * 4, xiStride, owB, d0, d1, d2, d3);
        continue;
      }
      gradTiles(tail, 16, owB, d0, d1, d2, d3);
      for (let k = 0; k < per - u; k++) {
        const o = gc + <usize>(u + k) * 4;
        for (let xi = 0; xi < X; xi++) store<f32>(o + <usize>xi * xiStride, load<f32>(tail + <usize>(16 * xi + 4 * k)));
      }
    }
  }
}

/** Value r of G^T (d0 .. d5): the filter gradient's transform along one axis, float64. */
@inline function gTT(d0: f64, d1: f64, d2: f64, d3: f64, d4: f64, d5: f64, r: i32): f64 {
  if (r == 0) return (d0 * 0.25 - (d1 + d2) * SIXTH) + (d3 + d4) * (SIXTH * 0.25);
  if (r == 1) return (d2 - d1) * SIXTH + (d3 - d4) * (SIXTH * 0.5);
  return ((d3 + d4) - (d1 + d2)) * SIXTH + d5;
}

/** Column j of dU (positions xi = 6i + j, `plane` bytes apart) through G^T: its 3 values into c (3 float64). */
@inline function gradCol(s: usize, plane: usize, j: i32, c: usize): void {
  const q = s + <usize>j * plane, p6 = 6 * plane;
  const d0 = <f64>load<f32>(q), d1 = <f64>load<f32>(q + p6), d2 = <f64>load<f32>(q + 2 * p6);
  const d3 = <f64>load<f32>(q + 3 * p6), d4 = <f64>load<f32>(q + 4 * p6), d5 = <f64>load<f32>(q + 5 * p6);
  const o = c + <usize>(8 * j);
  store<f64>(o, gTT(d0, d1, d2, d3, d4, d5, 0));
  store<f64>(o, gTT(d0, d1, d2, d3, d4, d5, 1), 48);
  store<f64>(o, gTT(d0, d1, d2, d3, d4, d5, 2), 96);
}

/** Row r of G^T dU (6 float64 at c + 48 r) times G: 3 filter values at o. */
@inline function gradRowOut(c: usize, r: i32, o: usize, accumulate: bool): void {
  const q = c + <usize>(48 * r);
  const c0 = load<f64>(q), c1 = load<f64>(q, 8), c2 = load<f64>(q, 16), c3 = load<f64>(q, 24), c4 = load<f64>(q, 32), c5 = load<f64>(q, 40);
  const at = o + <usize>(12 * r);
  storeLane(at, <f32>gTT(c0, c1, c2, c3, c4, c5, 0), accumulate);
  storeLane(at + 4, <f32>gTT(c0, c1, c2, c3, c4, c5, 1), accumulate);
  storeLane(at + 8, <f32>gTT(c0, c1, c2, c3, c4, c5, 2), accumulate);
}

/**
 * dw[co][ci] (=, or += when `accumulate`) = G^T dU[.][co][ci] G for filters [e0, e1) (e = co * cin + ci), dU [36][count]:
 * float64, rounded once. `scratch`: of wg4ScratchBytes (FILTER_GRAD_SCRATCH_BYTES used: G^T dU of one filter).
 */
const FILTER_GRAD_SCRATCH_BYTES: i32 = 3 * 6 * 8;

export function wg4FilterGrad(du: usize, e0: i32, e1: i32, count: i32, dw: usize, accumulate: bool, scratch: usize): void {
  const plane = <usize>count * 4;
  for (let e = e0; e < e1; e++) {
    const s = du + <usize>e * 4;
    const o = dw + <usize>e * 36;
    gradCol(s, plane, 0, scratch);
    gradCol(s, plane, 1, scratch);
    gradCol(s, plane, 2, scratch);
    gradCol(s, plane, 3, scratch);
    gradCol(s, plane, 4, scratch);
    gradCol(s, plane, 5, scratch);
    gradRowOut(scratch, 0, o, accumulate);
    gradRowOut(scratch, 1, o, accumulate);
    gradRowOut(scratch, 2, o, accumulate);
  }
}
