// Winograd F(2x2, 3x3) transforms for 3x3 stride-1 convolutions (src/wasm/ops-winograd.ts drives
// them). An output tile of 2x2 comes from a 4x4 input tile d (rows 2ty - ph .., columns 2tx - pw ..):
//   y = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) elementwise over the 16 positions xi = 4i + j
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// Summed over input channels, position by position, that is 16 GEMMs M_xi[Cout, T] = U_xi[Cout, Cin] V_xi[Cin, T]
// (T tiles): 16 Cout Cin multiply-adds per tile where the direct convolution needs 36.
// The filter gradient is the adjoint: dU_xi[Cout, Cin] = sum over tiles of (A dy A^T)_xi (B^T d B)_xi, then
// dg = G^T dU G. The input gradient is a forward pass of dy with the filter turned (w[co][ci] flipped 180 degrees,
// as [ci][co]) and padding 2 - p.
// Layouts: U [16][rows][cols]; V [16][C][ldT] and M [16][C][ldT] (tile t of a group at column t; an image's tiles
// row by row from column t0), the 16 planes of V and M `xiStride` bytes apart (the driver pads them apart in
// the cache). Every value is computed in one fixed order (no sums across threads).

/** 1/2 in the transforms: exact in float32. */
const H: f32 = 0.5;

/**
 * U [16][R][C] = G g G^T for every filter g = w[co][ci] (3x3), R x C = cout x cin; turned: cin x cout from g flipped 180 degrees
 * (the input gradient's filter). Each position's matrix is laid out as gemmPanels' A: 4-row panels, row r column k at
 * ((r / 4) C + k) 4 + r % 4, position xi's at u + xi plane; this call writes panels [b0, b1) (a thread's share), the rows
 * past R zero.
 */
export function wgFilter(w: usize, cout: i32, cin: i32, u: usize, turned: bool, plane: usize, b0: i32, b1: i32): void {
  const R = turned ? cin : cout, C = turned ? cout : cin;
  for (let b = b0; b < b1; b++) {
    for (let k = 0; k < C; k++) {
      for (let j = 0; j < 4; j++) {
        const r = b * 4 + j;
        const dst = u + <usize>(((b * C + k) << 2) + j) * 4;
        if (r >= R) {
          for (let xi = 0; xi < 16; xi++) store<f32>(dst + <usize>xi * plane, 0);
          continue;
        }
        const co = turned ? k : r, ci = turned ? r : k;
        const g = w + (<usize>(co * cin + ci) * 9) * 4;
        // g[r][c] as read (flipped 180 degrees when turned): k_rc.
        let k00 = load<f32>(g), k01 = load<f32>(g, 4), k02 = load<f32>(g, 8);
        const k10 = load<f32>(g, 12), k11 = load<f32>(g, 16), k12 = load<f32>(g, 20);
        let k20 = load<f32>(g, 24), k21 = load<f32>(g, 28), k22 = load<f32>(g, 32);
        let k10t = k10, k12t = k12;
        if (turned) {
          let t = k00; k00 = k22; k22 = t;
          t = k01; k01 = k21; k21 = t;
          t = k02; k02 = k20; k20 = t;
          k10t = k12; k12t = k10;
        }
        // Rows of G g: [k0], [(k0 + k2)/2 + k1/2], [(k0 + k2)/2 - k1/2], [k2] (k_r row r), each then times G^T.
        const p0 = (k00 + k20) * H, p1 = (k01 + k21) * H, p2 = (k02 + k22) * H;
        filterRow(dst, plane, k00, k01, k02);
        filterRow(dst + 4 * plane, plane, p0 + k10t * H, p1 + k11 * H, p2 + k12t * H);
        filterRow(dst + 8 * plane, plane, p0 - k10t * H, p1 - k11 * H, p2 - k12t * H);
        filterRow(dst + 12 * plane, plane, k20, k21, k22);
      }
    }
  }
}

/** One row (a, b, c) of G g times G^T: 4 values at xi stride `plane`. */
@inline function filterRow(dst: usize, plane: usize, a: f32, b: f32, c: f32): void {
  const p = (a + c) * H;
  store<f32>(dst, a);
  store<f32>(dst + plane, p + b * H);
  store<f32>(dst + 2 * plane, p - b * H);
  store<f32>(dst + 3 * plane, c);
}

/** Bytes of the padded-plane scratch wgInput needs for an image of th x tw tiles. */
export function wgInputScratchBytes(th: i32, tw: i32): i32 {
  return (2 * th + 2 + 4) * rowWidth(tw) * 4;
}

/** Row width (floats) of the padded plane: the 2 tw + 2 columns tiles read, plus what a 4-tile vector load reads past them. */
@inline function rowWidth(tw: i32): i32 {
  return ((2 * tw + 4 + 3) & ~3) + 4;
}

/**
 * V[xi][c][t0 + ty*tw + tx] (row stride ldT) = (B^T d B)_xi for every channel c in [c0, c1) of one image x [C, h, w]
 * (4x4 input tiles at rows 2ty - ph, columns 2tx - pw; zero outside). `pad` is scratch of wgInputScratchBytes.
 * With `panels`, each xi's matrix (rows `chans`, columns the tiles) is laid out as gemmPanels' B instead: 8-column
 * panels, channel c and tile t at ((t / 8) chans + c) 8 + t % 8 (ldT then a multiple of 8: the planes' distance).
 */
export function wgInput(x: usize, c0: i32, c1: i32, h: i32, w: i32, ph: i32, pw: i32, th: i32, tw: i32, v: usize, ldT: i32, chans: i32,
  t0: i32, pad: usize, panels: bool, xiStride: usize): void {
  const W = rowWidth(tw), rows = 2 * th + 2;
  const rowB = <usize>W * 4;
  const tmp = pad + <usize>rows * rowB; // 4 rows: the vertical transform of one tile row
  for (let c = c0; c < c1; c++) {
    padPlane(pad, rows, rowB, x + <usize>c * h * w * 4, h, w, ph, pw, 2 * tw + 2, c == c0);
    for (let ty = 0; ty < th; ty++) {
      // Vertical: B^T applied to the 4 rows 2ty .. 2ty + 3, every column.
      const r0 = pad + <usize>(2 * ty) * rowB, r1 = r0 + rowB, r2 = r1 + rowB, r3 = r2 + rowB;
      for (let q = 0; q < W; q += 4) {
        const o = <usize>q * 4;
        const a0 = v128.load(r0 + o), a1 = v128.load(r1 + o), a2 = v128.load(r2 + o), a3 = v128.load(r3 + o);
        v128.store(tmp + o, f32x4.sub(a0, a2));
        v128.store(tmp + rowB + o, f32x4.add(a1, a2));
        v128.store(tmp + 2 * rowB + o, f32x4.sub(a2, a1));
        v128.store(tmp + 3 * rowB + o, f32x4.sub(a1, a3));
      }
      // Horizontal: B applied to columns 2tx .. 2tx + 3 of each of the 4 rows; 4 tiles per vector.
      const tRow = t0 + ty * tw;
      for (let i = 0; i < 4; i++) {
        const row = tmp + <usize>i * rowB;
        const d = v + <usize>(4 * i) * xiStride;
        const tw4 = tw & ~3;
        for (let tx = 0; tx < tw4; tx += 4) {
          const s = row + <usize>(2 * tx) * 4;
          const l0 = v128.load(s), l1 = v128.load(s, 16), l2 = v128.load(s, 32);
          const e0 = f32x4.shuffle(l0, l1, 0, 2, 4, 6), o0 = f32x4.shuffle(l0, l1, 1, 3, 5, 7);
          const e1 = f32x4.shuffle(l1, l2, 0, 2, 4, 6), o1 = f32x4.shuffle(l1, l2, 1, 3, 5, 7);
          const c2 = f32x4.shuffle(e0, e1, 1, 2, 3, 6), c3 = f32x4.shuffle(o0, o1, 1, 2, 3, 6);
          const t = tRow + tx;
          if (!panels || (t & 7) <= 4) {
            // The 4 tiles are adjacent (always in rows; in panels unless they cross into the next panel).
            const o = d + vSlot(c, t, ldT, chans, panels);
            v128.store(o, f32x4.sub(e0, c2));
            v128.store(o + xiStride, f32x4.add(o0, c2));
            v128.store(o + 2 * xiStride, f32x4.sub(c2, o0));
            v128.store(o + 3 * xiStride, f32x4.sub(o0, c3));
          } else {
            store4(d, xiStride, c, t, ldT, chans, f32x4.sub(e0, c2), f32x4.add(o0, c2), f32x4.sub(c2, o0), f32x4.sub(o0, c3));
          }
        }
        for (let tx = tw4; tx < tw; tx++) {
          const s = row + <usize>(2 * tx) * 4;
          const a0 = load<f32>(s), a1 = load<f32>(s, 4), a2 = load<f32>(s, 8), a3 = load<f32>(s, 12);
          const o = d + vSlot(c, tRow + tx, ldT, chans, panels);
          store<f32>(o, a0 - a2);
          store<f32>(o + xiStride, a1 + a2);
          store<f32>(o + 2 * xiStride, a2 - a1);
          store<f32>(o + 3 * xiStride, a1 - a3);
        }
      }
    }
  }
}

/**
 * The padded plane of a channel (both tile sizes' input transforms): `rows` rows of rowB bytes at pad, row r and
 * column q holding plane[r - ph][q - pw] for the `cols` columns tiles read (0 outside the plane). Only the plane's
 * rows are written, so the zeros around them are filled once (`zero`) for all the planes of one geometry. The rows
 * are copied by vectors in place of memory.copy, whose call into the host cost more than the copy on rows this short.
 */
export function padPlane(pad: usize, rows: i32, rowB: usize, plane: usize, h: i32, w: i32, ph: i32, pw: i32, cols: i32, zero: bool): void {
  if (zero) memory.fill(pad, 0, <usize>rows * rowB);
  const q1 = min(cols, w + pw); // columns [pw, q1) hold data
  if (q1 <= pw) return;
  const n = <usize>(q1 - pw) * 4, n16 = n & ~15;
  for (let r = 0; r < rows; r++) {
    const iy = r - ph;
    if (iy < 0 || iy >= h) continue;
    const d = pad + <usize>r * rowB + <usize>pw * 4, s = plane + <usize>iy * w * 4;
    for (let i: usize = 0; i < n16; i += 16) v128.store(d + i, v128.load(s + i));
    for (let i = n16; i < n; i += 4) store<f32>(d + i, load<f32>(s + i));
  }
}

/** Byte offset of channel c, tile t within one xi's V: rows [c][ldT], or 8-column panels (wgInput). */
@inline function vSlot(c: i32, t: i32, ldT: i32, chans: i32, panels: bool): usize {
  return (panels ? <usize>(((t >> 3) * chans + c) * 8 + (t & 7)) : <usize>c * ldT + t) * 4;
}

/** Tiles t .. t + 3 (one per lane) of channel c at the 4 positions xi, xi + 1, ... (xiStride apart), one by one in panels. */
function store4(d: usize, xiStride: usize, c: i32, t: i32, ldT: i32, chans: i32, p0: v128, p1: v128, p2: v128, p3: v128): void {
  let o = d + vSlot(c, t, ldT, chans, true);
  lane4(o, xiStride, f32x4.extract_lane(p0, 0), f32x4.extract_lane(p1, 0), f32x4.extract_lane(p2, 0), f32x4.extract_lane(p3, 0));
  o = d + vSlot(c, t + 1, ldT, chans, true);
  lane4(o, xiStride, f32x4.extract_lane(p0, 1), f32x4.extract_lane(p1, 1), f32x4.extract_lane(p2, 1), f32x4.extract_lane(p3, 1));
  o = d + vSlot(c, t + 2, ldT, chans, true);
  lane4(o, xiStride, f32x4.extract_lane(p0, 2), f32x4.extract_lane(p1, 2), f32x4.extract_lane(p2, 2), f32x4.extract_lane(p3, 2));
  o = d + vSlot(c, t + 3, ldT, chans, true);
  lane4(o, xiStride, f32x4.extract_lane(p0, 3), f32x4.extract_lane(p1, 3), f32x4.extract_lane(p2, 3), f32x4.extract_lane(p3, 3));
}

@inline function lane4(o: usize, xiStride: usize, a: f32, b: f32, c: f32, d: f32): void {
  store<f32>(o, a);
  store<f32>(o + xiStride, b);
  store<f32>(o + 2 * xiStride, c);
  store<f32>(o + 3 * xiStride, d);
}

/**
 * y[c][2ty + i][2tx + j] (=, or += when `accumulate`) = (A^T M A)_ij for channels [c0, c1) of one image y [C, oh, ow],
 * M[xi][c][t0 + ty*tw + tx] (row stride ldT, `chans` rows per xi).
 */
export function wgOutput(m: usize, c0: i32, c1: i32, oh: i32, ow: i32, th: i32, tw: i32, ldT: i32, chans: i32, t0: i32, y: usize,
  accumulate: bool, xiStride: usize): void {
  const owB = <usize>ow * 4;
  for (let c = c0; c < c1; c++) {
    const mc = m + (<usize>c * ldT + t0) * 4;
    const yc = y + <usize>c * oh * ow * 4;
    for (let ty = 0; ty < th; ty++) {
      const fullRows = 2 * ty + 1 < oh;
      const y0 = yc + <usize>(2 * ty) * owB, y1 = y0 + owB;
      let tx = 0;
      // Vectors of 4 whole tiles (8 output columns of 2 rows).
      for (; fullRows && tx + 3 < tw && 2 * tx + 7 < ow; tx += 4) {
        const p = mc + <usize>(ty * tw + tx) * 4;
        // s_i_j: the vertical sums, row i of A^T applied over xi rows, for column j.
        const m00 = v128.load(p), m01 = v128.load(p + xiStride), m02 = v128.load(p + 2 * xiStride), m03 = v128.load(p + 3 * xiStride);
        const m10 = v128.load(p + 4 * xiStride), m11 = v128.load(p + 5 * xiStride), m12 = v128.load(p + 6 * xiStride);
        const m13 = v128.load(p + 7 * xiStride);
        const m20 = v128.load(p + 8 * xiStride), m21 = v128.load(p + 9 * xiStride), m22 = v128.load(p + 10 * xiStride);
        const m23 = v128.load(p + 11 * xiStride);
        const m30 = v128.load(p + 12 * xiStride), m31 = v128.load(p + 13 * xiStride), m32 = v128.load(p + 14 * xiStride);
        const m33 = v128.load(p + 15 * xiStride);
        const s00 = f32x4.add(f32x4.add(m00, m10), m20), s10 = f32x4.sub(f32x4.sub(m10, m20), m30);
        const s01 = f32x4.add(f32x4.add(m01, m11), m21), s11 = f32x4.sub(f32x4.sub(m11, m21), m31);
        const s02 = f32x4.add(f32x4.add(m02, m12), m22), s12 = f32x4.sub(f32x4.sub(m12, m22), m32);
        const s03 = f32x4.add(f32x4.add(m03, m13), m23), s13 = f32x4.sub(f32x4.sub(m13, m23), m33);
        const y00 = f32x4.add(f32x4.add(s00, s01), s02), y01 = f32x4.sub(f32x4.sub(s01, s02), s03);
        const y10 = f32x4.add(f32x4.add(s10, s11), s12), y11 = f32x4.sub(f32x4.sub(s11, s12), s13);
        const q = <usize>(2 * tx) * 4;
        storeOut(y0 + q, f32x4.shuffle(y00, y01, 0, 4, 1, 5), accumulate);
        storeOut(y0 + q + 16, f32x4.shuffle(y00, y01, 2, 6, 3, 7), accumulate);
        storeOut(y1 + q, f32x4.shuffle(y10, y11, 0, 4, 1, 5), accumulate);
        storeOut(y1 + q + 16, f32x4.shuffle(y10, y11, 2, 6, 3, 7), accumulate);
      }
      for (; tx < tw; tx++) {
        const p = mc + <usize>(ty * tw + tx) * 4;
        const s00 = (load<f32>(p) + load<f32>(p + 4 * xiStride)) + load<f32>(p + 8 * xiStride);
        const s01 = (load<f32>(p + xiStride) + load<f32>(p + 5 * xiStride)) + load<f32>(p + 9 * xiStride);
        const s02 = (load<f32>(p + 2 * xiStride) + load<f32>(p + 6 * xiStride)) + load<f32>(p + 10 * xiStride);
        const s03 = (load<f32>(p + 3 * xiStride) + load<f32>(p + 7 * xiStride)) + load<f32>(p + 11 * xiStride);
        const s10 = (load<f32>(p + 4 * xiStride) - load<f32>(p + 8 * xiStride)) - load<f32>(p + 12 * xiStride);
        const s11 = (load<f32>(p + 5 * xiStride) - load<f32>(p + 9 * xiStride)) - load<f32>(p + 13 * xiStride);
        const s12 = (load<f32>(p + 6 * xiStride) - load<f32>(p + 10 * xiStride)) - load<f32>(p + 14 * xiStride);
        const s13 = (load<f32>(p + 7 * xiStride) - load<f32>(p + 11 * xiStride)) - load<f32>(p + 15 * xiStride);
        const q = <usize>(2 * tx) * 4;
        const right = 2 * tx + 1 < ow;
        storeOne(y0 + q, (s00 + s01) + s02, accumulate);
        if (right) storeOne(y0 + q + 4, (s01 - s02) - s03, accumulate);
        if (2 * ty + 1 < oh) {
          storeOne(y1 + q, (s10 + s11) + s12, accumulate);
          if (right) storeOne(y1 + q + 4, (s11 - s12) - s13, accumulate);
        }
      }
    }
  }
}

@inline function storeOut(p: usize, v: v128, accumulate: bool): void {
  v128.store(p, accumulate ? f32x4.add(v128.load(p), v) : v);
}

@inline function storeOne(p: usize, v: f32, accumulate: bool): void {
  store<f32>(p, accumulate ? load<f32>(p) + v : v);
}

/**
 * G[xi][c][t0 + ty*tw + tx] (row stride ldT) = (A g A^T)_xi for channels [c0, c1) of one image's output gradient
 * dy [C, oh, ow], g its 2x2 tile at (2ty, 2tx) (zero outside): the filter gradient's transform of dy.
 */
export function wgGradOut(dy: usize, c0: i32, c1: i32, oh: i32, ow: i32, th: i32, tw: i32, g: usize, ldT: i32, chans: i32, t0: i32,
  xiStride: usize): void {
  const owB = <usize>ow * 4;
  for (let c = c0; c < c1; c++) {
    const gc = g + (<usize>c * ldT + t0) * 4;
    const dc = dy + <usize>c * oh * ow * 4;
    for (let ty = 0; ty < th; ty++) {
      const fullRows = 2 * ty + 1 < oh;
      const d0 = dc + <usize>(2 * ty) * owB, d1 = d0 + owB;
      let tx = 0;
      for (; fullRows && tx + 3 < tw && 2 * tx + 7 < ow; tx += 4) {
        const q = <usize>(2 * tx) * 4;
        const a0 = v128.load(d0 + q), a1 = v128.load(d0 + q, 16), b0 = v128.load(d1 + q), b1 = v128.load(d1 + q, 16);
        const g00 = f32x4.shuffle(a0, a1, 0, 2, 4, 6), g01 = f32x4.shuffle(a0, a1, 1, 3, 5, 7);
        const g10 = f32x4.shuffle(b0, b1, 0, 2, 4, 6), g11 = f32x4.shuffle(b0, b1, 1, 3, 5, 7);
        gradTile4(gc + <usize>(ty * tw + tx) * 4, xiStride, g00, g01, g10, g11);
      }
      for (; tx < tw; tx++) {
        const right = 2 * tx + 1 < ow;
        const q = <usize>(2 * tx) * 4;
        const g00 = load<f32>(d0 + q), g01 = right ? load<f32>(d0 + q + 4) : 0;
        const g10 = fullRows ? load<f32>(d1 + q) : 0, g11 = fullRows && right ? load<f32>(d1 + q + 4) : 0;
        gradTile4(gc + <usize>(ty * tw + tx) * 4, xiStride, f32x4.splat(g00), f32x4.splat(g01), f32x4.splat(g10), f32x4.splat(g11), true);
      }
    }
  }
}

/** Writes A g A^T of 4 tiles (one per lane), or of lane 0 only when `one`, at p (+ xi * xiStride). */
@inline function gradTile4(p: usize, xiStride: usize, g00: v128, g01: v128, g10: v128, g11: v128, one: bool = false): void {
  // Rows of A g: [g0], [g0 + g1], [g0 - g1], [-g1] (g0, g1 the tile's rows), then the same along each row.
  const zero = f32x4.splat(0);
  const r00 = g00, r01 = g01;
  const r10 = f32x4.add(g00, g10), r11 = f32x4.add(g01, g11);
  const r20 = f32x4.sub(g00, g10), r21 = f32x4.sub(g01, g11);
  const r30 = f32x4.sub(zero, g10), r31 = f32x4.sub(zero, g11);
  gradRow(p, xiStride, r00, r01, one);
  gradRow(p + 4 * xiStride, xiStride, r10, r11, one);
  gradRow(p + 8 * xiStride, xiStride, r20, r21, one);
  gradRow(p + 12 * xiStride, xiStride, r30, r31, one);
}

@inline function gradRow(p: usize, xiStride: usize, a: v128, b: v128, one: bool): void {
  const v0 = a, v1 = f32x4.add(a, b), v2 = f32x4.sub(a, b), v3 = f32x4.sub(f32x4.splat(0), b);
  if (one) {
    store<f32>(p, f32x4.extract_lane(v0, 0));
    store<f32>(p + xiStride, f32x4.extract_lane(v1, 0));
    store<f32>(p + 2 * xiStride, f32x4.extract_lane(v2, 0));
    store<f32>(p + 3 * xiStride, f32x4.extract_lane(v3, 0));
  } else {
    v128.store(p, v0);
    v128.store(p + xiStride, v1);
    v128.store(p + 2 * xiStride, v2);
    v128.store(p + 3 * xiStride, v3);
  }
}

/**
 * dw[co][ci] (=, or += when `accumulate`) = G^T dU[.][co][ci] G for filters [e0, e1) (e = co * cin + ci),
 * dU [16][cout * cin].
 */
export function wgFilterGrad(du: usize, e0: i32, e1: i32, count: i32, dw: usize, accumulate: bool): void {
  const plane = <usize>count * 4;
  for (let e = e0; e < e1; e++) {
    const s = du + <usize>e * 4;
    const o = dw + <usize>e * 36;
    // Columns j of G^T dU: [d0 + (d1 + d2)/2], [(d1 - d2)/2], [(d1 + d2)/2 + d3] (d_i = dU[4i + j]); then rows times G.
    const a0 = gradCol(s, plane, 0), a1 = gradCol(s, plane, 1), a2 = gradCol(s, plane, 2), a3 = gradCol(s, plane, 3);
    gradFilterRow(o, f32x4.extract_lane(a0, 0), f32x4.extract_lane(a1, 0), f32x4.extract_lane(a2, 0), f32x4.extract_lane(a3, 0), accumulate);
    gradFilterRow(o + 12, f32x4.extract_lane(a0, 1), f32x4.extract_lane(a1, 1), f32x4.extract_lane(a2, 1), f32x4.extract_lane(a3, 1), accumulate);
    gradFilterRow(o + 24, f32x4.extract_lane(a0, 2), f32x4.extract_lane(a1, 2), f32x4.extract_lane(a2, 2), f32x4.extract_lane(a3, 2), accumulate);
  }
}

/** Column j of G^T dU (3 values in lanes 0..2) at filter s. */
@inline function gradCol(s: usize, plane: usize, j: i32): v128 {
  const d0 = load<f32>(s + <usize>j * plane), d1 = load<f32>(s + <usize>(4 + j) * plane);
  const d2 = load<f32>(s + <usize>(8 + j) * plane), d3 = load<f32>(s + <usize>(12 + j) * plane);
  const p = (d1 + d2) * H;
  return f32x4(d0 + p, (d1 - d2) * H, p + d3, 0);
}

/** One row (a, b, c, d) of G^T dU times G: 3 filter values at o. */
@inline function gradFilterRow(o: usize, a: f32, b: f32, c: f32, d: f32, accumulate: bool): void {
  const p = (b + c) * H;
  storeOne(o, a + p, accumulate);
  storeOne(o + 4, (b - c) * H, accumulate);
  storeOne(o + 8, p + d, accumulate);
}
