// conv2d helpers for one image (NCHW): im2col and col2im. The convolution itself is a GEMM
// (src/wasm/ops-linalg.ts drives them):
//   forward          y[Cout, S]   = w[Cout, K] col[K, S]          K = Cin*KH*KW, S = OH*OW
//   backward input   dcol[K, S]   = w^T dy[Cout, S];  dx += col2im(dcol)
//   backward filter  dw[Cout, K] += dy[Cout, S] col^T   (gemmNT: both have S contiguous)
// col[k = (ci*KH + ky)*KW + kx, s = oy*OW + ox] = x[ci, oy*sh - ph + ky, ox*sw - pw + kx] (0 outside).
// `ld` is col's row stride in elements (>= S): several images' columns can sit side by side,
// one longer GEMM instead of many short ones when S is small.

/** Output columns [ox0, ox1) whose input column ox*sw - pw + kx lies in [0, w). */
@inline function colRange(ow: i32, w: i32, sw: i32, pw: i32, kx: i32): i64 {
  // ix = ox*sw + d >= 0  <=>  ox >= ceil(-d / sw); ix < w  <=>  ox <= floor((w - 1 - d) / sw)
  const d = kx - pw;
  let lo = 0;
  if (d < 0) lo = (-d + sw - 1) / sw;
  let hi = w - 1 - d < 0 ? 0 : (w - 1 - d) / sw + 1;
  if (hi > ow) hi = ow;
  if (lo > hi) lo = hi;
  return (<i64>lo << 32) | <i64>hi;
}

/** col[K, S] (row stride ld) from x [Cin, H, W]. */
export function im2col(x: usize, cin: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32,
  oh: i32, ow: i32, col: usize, ld: i32): void {
  const rowB = <usize>ow * 4;
  const skip = <usize>(ld - oh * ow) * 4;
  let dst = col;
  for (let ci = 0; ci < cin; ci++) {
    const plane = x + <usize>ci * h * w * 4;
    for (let ky = 0; ky < kh; ky++) {
      for (let kx = 0; kx < kw; kx++) {
        const r = colRange(ow, w, sw, pw, kx);
        const lo = <i32>(r >> 32), hi = <i32>(r & 0xffffffff);
        for (let oy = 0; oy < oh; oy++) {
          const iy = oy * sh - ph + ky;
          if (iy < 0 || iy >= h || lo >= hi) {
            memory.fill(dst, 0, rowB);
          } else {
            if (lo > 0) memory.fill(dst, 0, <usize>lo * 4);
            const src = plane + (<usize>iy * w + (lo * sw - pw + kx)) * 4;
            if (sw == 1) {
              memory.copy(dst + <usize>lo * 4, src, <usize>(hi - lo) * 4);
            } else {
              // Stride 2: 4 outputs from 8 inputs at a time (their even lanes), while the 8 lie in the input row.
              let ox = lo;
              if (sw == 2) {
                const avail = w - (lo * sw - pw + kx);
                for (; ox + 4 <= hi && (ox - lo) * 2 + 8 <= avail; ox += 4) {
                  const a = src + <usize>((ox - lo) * 2) * 4;
                  v128.store(dst + <usize>ox * 4, f32x4.shuffle(v128.load(a), v128.load(a + 16), 0, 2, 4, 6));
                }
              }
              for (; ox < hi; ox++) store<f32>(dst + <usize>ox * 4, load<f32>(src + <usize>((ox - lo) * sw) * 4));
            }
            if (hi < ow) memory.fill(dst + <usize>hi * 4, 0, <usize>(ow - hi) * 4);
          }
          dst += rowB;
        }
        dst += skip;
      }
    }
  }
}

/** dx [Cin, H, W] += col2im(col[K, S], row stride ld): the adjoint of im2col, in a fixed order. */
export function col2imAdd(col: usize, cin: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32,
  oh: i32, ow: i32, dx: usize, ld: i32): void {
  const rowB = <usize>ow * 4;
  const skip = <usize>(ld - oh * ow) * 4;
  let src = col;
  for (let ci = 0; ci < cin; ci++) {
    const plane = dx + <usize>ci * h * w * 4;
    for (let ky = 0; ky < kh; ky++) {
      for (let kx = 0; kx < kw; kx++) {
        const r = colRange(ow, w, sw, pw, kx);
        const lo = <i32>(r >> 32), hi = <i32>(r & 0xffffffff);
        for (let oy = 0; oy < oh; oy++) {
          const iy = oy * sh - ph + ky;
          if (iy >= 0 && iy < h && lo < hi) {
            const d = plane + (<usize>iy * w + (lo * sw - pw + kx)) * 4;
            const s = src + <usize>lo * 4;
            const n = hi - lo;
            if (sw == 1) {
              const n4 = n & ~3;
              for (let i = 0; i < n4; i += 4) {
                const o = <usize>i * 4;
                v128.store(d + o, f32x4.add(v128.load(d + o), v128.load(s + o)));
              }
              for (let i = n4; i < n; i++) {
                const o = <usize>i * 4;
                store<f32>(d + o, load<f32>(d + o) + load<f32>(s + o));
              }
            } else {
              let i = 0;
              if (sw == 2) {
                // 4 values onto the even lanes of 8 while the 8 lie in the row (past it: another image's, maybe another
                // thread's); the odd lanes keep dx's bits (selected, not + 0, which turns -0 into +0).
                const even = i32x4(-1, 0, -1, 0), avail = w - (lo * sw - pw + kx);
                for (; i + 4 <= n && i * 2 + 8 <= avail; i += 4) {
                  const p = d + <usize>(i * 2) * 4, v = v128.load(s + <usize>i * 4);
                  const a = v128.load(p), b = v128.load(p, 16);
                  v128.store(p, v128.bitselect(f32x4.add(a, f32x4.shuffle(v, v, 0, 0, 1, 1)), a, even));
                  v128.store(p, v128.bitselect(f32x4.add(b, f32x4.shuffle(v, v, 2, 2, 3, 3)), b, even), 16);
                }
              }
              for (; i < n; i++) {
                const p = d + <usize>(i * sw) * 4;
                store<f32>(p, load<f32>(p) + load<f32>(s + <usize>i * 4));
              }
            }
          }
          src += rowB;
        }
        src += skip;
      }
    }
  }
}

/** rows x cols floats from src (row stride srcLd elements) to dst (row stride dstLd). */
export function copyRows(src: usize, srcLd: i32, dst: usize, dstLd: i32, rows: i32, cols: i32): void {
  for (let r = 0; r < rows; r++) memory.copy(dst + <usize>r * dstLd * 4, src + <usize>r * srcLd * 4, <usize>cols * 4);
}
