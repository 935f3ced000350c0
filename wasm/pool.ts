// 2-D pooling over `planes` planes of H x W (NCHW, N*C planes), as src/ops/pool.ts defines:
// floor mode, padding never part of a max or a mean, average divides by the in-image count,
// max ties to the first max in row-major window order (a NaN never beats the running max),
// argmax = iy*W + ix inside the plane. Backward scatters into a zeroed dx in output order.
import { maskPlane } from './eltwise';

/** First input row (or column) of window o, clipped to the image. */
@inline function lo(o: i32, s: i32, p: i32): i32 {
  const v = o * s - p;
  return v < 0 ? 0 : v;
}

/** One past the last input row (or column) of window o, clipped to the image. */
@inline function hi(o: i32, s: i32, p: i32, k: i32, size: i32): i32 {
  const v = o * s - p + k;
  return v > size ? size : v;
}

export function maxPoolForward(x: usize, y: usize, argmax: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32): void {
  const twoByTwo = kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0;
  let out = 0;
  for (let pl = 0; pl < planes; pl++) {
    const base = x + <usize>pl * h * w * 4;
    for (let oy = 0; oy < oh; oy++) {
      const y0 = lo(oy, sh, ph), y1 = hi(oy, sh, ph, kh, h);
      let ox = 0;
      if (twoByTwo) {
        // 4 windows at once (columns 2ox .. 2ox + 7 of rows y0, y0 + 1): the same comparisons in the same order.
        for (; 2 * ox + 8 <= w; ox += 4) {
          maxPool2x2Four(base, w, y0, ox, y + <usize>out * 4, argmax + <usize>out * 4);
          out += 4;
        }
      }
      for (; ox < ow; ox++) {
        const x0 = lo(ox, sw, pw), x1 = hi(ox, sw, pw, kw, w);
        let best = y0 * w + x0;
        let bv = load<f32>(base + <usize>best * 4);
        for (let iy = y0; iy < y1; iy++) {
          for (let ix = x0; ix < x1; ix++) {
            const i = iy * w + ix;
            const v = load<f32>(base + <usize>i * 4);
            if (v > bv) { bv = v; best = i; }
          }
        }
        store<f32>(y + <usize>out * 4, bv);
        store<u32>(argmax + <usize>out * 4, <u32>best);
        out++;
      }
    }
  }
}

/**
 * Windows ox .. ox + 3 of a 2x2 stride-2 unpadded max pool, output row at y0 / 2: each lane takes its window's values in
 * row-major order and keeps the first unless a later one is greater (a NaN is never greater: as the scalar loop).
 */
@inline function maxPool2x2Four(base: usize, w: i32, y0: i32, ox: i32, y: usize, argmax: usize): void {
  const i0 = y0 * w + 2 * ox;
  const r0 = base + <usize>i0 * 4, r1 = r0 + <usize>w * 4;
  const a0 = v128.load(r0), a1 = v128.load(r0, 16), b0 = v128.load(r1), b1 = v128.load(r1, 16);
  const idx = i32x4.add(i32x4.splat(i0), i32x4(0, 2, 4, 6));
  let bv = f32x4.shuffle(a0, a1, 0, 2, 4, 6);
  let bi = idx;
  let v = f32x4.shuffle(a0, a1, 1, 3, 5, 7);
  let gt = f32x4.gt(v, bv);
  bv = v128.bitselect(v, bv, gt);
  bi = v128.bitselect(i32x4.add(idx, i32x4.splat(1)), bi, gt);
  v = f32x4.shuffle(b0, b1, 0, 2, 4, 6);
  gt = f32x4.gt(v, bv);
  bv = v128.bitselect(v, bv, gt);
  bi = v128.bitselect(i32x4.add(idx, i32x4.splat(w)), bi, gt);
  v = f32x4.shuffle(b0, b1, 1, 3, 5, 7);
  gt = f32x4.gt(v, bv);
  bv = v128.bitselect(v, bv, gt);
  bi = v128.bitselect(i32x4.add(idx, i32x4.splat(w + 1)), bi, gt);
  v128.store(y, bv);
  v128.store(argmax, bi);
}

/**
 * dx = 0, then dx[plane, argmax] += dy in output order. With `twoByTwo` (the forward was an unpadded 2x2 stride-2
 * pool), a plane whose every argmax lies in its own window is written window by window instead: each position gets
 * 0 + dy where it is the argmax, else 0, the same values; any other plane as above.
 */
export function maxPoolBackward(dy: usize, argmax: usize, dx: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32, twoByTwo: bool): void {
  const hw = h * w, ohw = oh * ow;
  for (let pl = 0; pl < planes; pl++) {
    backwardPlane(dy + <usize>pl * ohw * 4, argmax + <usize>pl * ohw * 4, dx + <usize>pl * hw * 4, h, w, oh, ow, twoByTwo);
  }
}

/** One plane of maxPoolBackward: dx (h x w at base) from the plane's dy and argmax (oh x ow). */
@inline function backwardPlane(dy: usize, argmax: usize, base: usize, h: i32, w: i32, oh: i32, ow: i32, twoByTwo: bool): void {
  if (twoByTwo && backward2x2(dy, argmax, base, h, w, oh, ow)) return;
  const hw = h * w, ohw = oh * ow;
  memory.fill(base, 0, <usize>hw * 4);
  for (let j = 0; j < ohw; j++) {
    const a = load<u32>(argmax + <usize>j * 4);
    // An argmax outside the plane (not from forward) is ignored rather than written out of bounds.
    if (a < <u32>hw) {
      const p = base + <usize>a * 4;
      store<f32>(p, load<f32>(p) + load<f32>(dy + <usize>j * 4));
    }
  }
}

/**
 * The backward of a max pool that reads a biasRelu's output y, and of that ReLU, over `planes` planes in order:
 * dx = y > 0 ? maxPoolBackward(dy) : 0, and sums[p] = the sum of plane p of dx in sumPlane's order. maxPoolBackward then
 * reluBiasBackward's mask, with their bits: each plane's pool gradient is written to dx and masked there while it is in
 * cache (the two ops apart write it to memory and read it back). biasFromPlaneSums then makes the bias gradient.
 */
export function poolReluBackward(dy: usize, argmax: usize, y: usize, dx: usize, sums: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  twoByTwo: bool): void {
  const hw = h * w, ohw = oh * ow;
  for (let pl = 0; pl < planes; pl++) {
    const o = <usize>pl * ohw * 4, p = <usize>pl * hw * 4;
    backwardPlane(dy + o, argmax + o, dx + p, h, w, oh, ow, twoByTwo);
    store<f32>(sums + <usize>pl * 4, maskPlane(y + p, dx + p, dx + p, hw));
  }
}

/** db[c] (+)= the plane sums of channel c (sums [N, C]) accumulated in f64 sample by sample, for channels [c0, c1): biasBackward's order. */
export function biasFromPlaneSums(sums: usize, db: usize, n: i32, c: i32, accumulate: bool, c0: i32, c1: i32): void {
  for (let ch = c0; ch < c1; ch++) {
    let s: f64 = 0;
    for (let b = 0; b < n; b++) s += <f64>load<f32>(sums + <usize>(b * c + ch) * 4);
    const q = db + <usize>ch * 4;
    store<f32>(q, accumulate ? load<f32>(q) + <f32>s : <f32>s);
  }
}

/** One plane of a 2x2 stride-2 max pool's backward, window by window (4 at a time); false when an argmax lies outside its window. */
function backward2x2(dy: usize, argmax: usize, dx: usize, h: i32, w: i32, oh: i32, ow: i32): bool {
  const zero = f32x4.splat(0);
  let bad = i32x4.splat(0);
  const wB = <usize>w * 4;
  for (let oy = 0; oy < oh; oy++) {
    const r0 = dx + <usize>(2 * oy) * wB, r1 = r0 + wB;
    let ox = 0;
    for (; 2 * ox + 8 <= w && ox + 4 <= ow; ox += 4) {
      const j = <usize>(oy * ow + ox) * 4;
      const a = v128.load(argmax + j), d = f32x4.add(zero, v128.load(dy + j));
      const p = i32x4.add(i32x4.splat(2 * oy * w + 2 * ox), i32x4(0, 2, 4, 6));
      const e00 = i32x4.eq(a, p), e01 = i32x4.eq(a, i32x4.add(p, i32x4.splat(1)));
      const e10 = i32x4.eq(a, i32x4.add(p, i32x4.splat(w))), e11 = i32x4.eq(a, i32x4.add(p, i32x4.splat(w + 1)));
      bad = v128.or(bad, v128.not(v128.or(v128.or(e00, e01), v128.or(e10, e11))));
      const v00 = v128.and(d, e00), v01 = v128.and(d, e01), v10 = v128.and(d, e10), v11 = v128.and(d, e11);
      const q = <usize>(2 * ox) * 4;
      v128.store(r0 + q, i32x4.shuffle(v00, v01, 0, 4, 1, 5));
      v128.store(r0 + q, i32x4.shuffle(v00, v01, 2, 6, 3, 7), 16);
      v128.store(r1 + q, i32x4.shuffle(v10, v11, 0, 4, 1, 5));
      v128.store(r1 + q, i32x4.shuffle(v10, v11, 2, 6, 3, 7), 16);
    }
    for (; ox < ow; ox++) {
      const j = <usize>(oy * ow + ox) * 4;
      const a = load<i32>(argmax + j), d = <f32>0 + load<f32>(dy + j);
      const p = 2 * oy * w + 2 * ox;
      if (a != p && a != p + 1 && a != p + w && a != p + w + 1) return false;
      const q = <usize>(2 * ox) * 4;
      store<f32>(r0 + q, a == p ? d : 0);
      store<f32>(r0 + q + 4, a == p + 1 ? d : 0);
      store<f32>(r1 + q, a == p + w ? d : 0);
      store<f32>(r1 + q + 4, a == p + w + 1 ? d : 0);
    }
    if (w > 2 * ow) for (let x = 2 * ow; x < w; x++) { store<f32>(r0 + <usize>x * 4, 0); store<f32>(r1 + <usize>x * 4, 0); }
  }
  if (h > 2 * oh) memory.fill(dx + <usize>(2 * oh) * wB, 0, <usize>(h - 2 * oh) * wB);
  return !v128.any_true(bad);
}

export function avgPoolForward(x: usize, y: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32): void {
  let out = 0;
  for (let pl = 0; pl < planes; pl++) {
    const base = x + <usize>pl * h * w * 4;
    for (let oy = 0; oy < oh; oy++) {
      const y0 = lo(oy, sh, ph), y1 = hi(oy, sh, ph, kh, h);
      for (let ox = 0; ox < ow; ox++) {
        const x0 = lo(ox, sw, pw), x1 = hi(ox, sw, pw, kw, w);
        let s: f32 = 0;
        for (let iy = y0; iy < y1; iy++) {
          for (let ix = x0; ix < x1; ix++) s += load<f32>(base + <usize>(iy * w + ix) * 4);
        }
        store<f32>(y + <usize>out * 4, s / <f32>((y1 - y0) * (x1 - x0)));
        out++;
      }
    }
  }
}

export function avgPoolBackward(dy: usize, dx: usize, planes: i32, h: i32, w: i32, oh: i32, ow: i32,
  kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32): void {
  memory.fill(dx, 0, <usize>planes * h * w * 4);
  let o = 0;
  for (let pl = 0; pl < planes; pl++) {
    const base = dx + <usize>pl * h * w * 4;
    for (let oy = 0; oy < oh; oy++) {
      const y0 = lo(oy, sh, ph), y1 = hi(oy, sh, ph, kh, h);
      for (let ox = 0; ox < ow; ox++) {
        const x0 = lo(ox, sw, pw), x1 = hi(ox, sw, pw, kw, w);
        const g = load<f32>(dy + <usize>o * 4) / <f32>((y1 - y0) * (x1 - x0));
        for (let iy = y0; iy < y1; iy++) {
          for (let ix = x0; ix < x1; ix++) {
            const p = base + <usize>(iy * w + ix) * 4;
            store<f32>(p, load<f32>(p) + g);
          }
        }
        o++;
      }
    }
  }
}

/** y[pl] = mean of plane pl (hw values): the global average pool. */
export function globalAvgPoolForward(x: usize, y: usize, planes: i32, hw: i32): void {
  for (let pl = 0; pl < planes; pl++) {
    const p = x + <usize>pl * hw * 4;
    let acc = f32x4.splat(0);
    const n4 = hw & ~3;
    for (let j = 0; j < n4; j += 4) acc = f32x4.add(acc, v128.load(p + <usize>j * 4));
    let s = (f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1)) + (f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3));
    for (let j = n4; j < hw; j++) s += load<f32>(p + <usize>j * 4);
    store<f32>(y + <usize>pl * 4, s / <f32>hw);
  }
}

/** dx[pl, :] = dy[pl] / hw. */
export function globalAvgPoolBackward(dy: usize, dx: usize, planes: i32, hw: i32): void {
  for (let pl = 0; pl < planes; pl++) {
    const g = load<f32>(dy + <usize>pl * 4) / <f32>hw;
    const v = f32x4.splat(g);
    const p = dx + <usize>pl * hw * 4;
    const n4 = hw & ~3;
    for (let j = 0; j < n4; j += 4) v128.store(p + <usize>j * 4, v);
    for (let j = n4; j < hw; j++) store<f32>(p + <usize>j * 4, g);
  }
}
