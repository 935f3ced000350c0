// The host optimiser's two loops (src/optim/host.ts runs the step; src/optim/host-wasm.ts hands
// these its arrays): the same float64 arithmetic in the same order as the JavaScript loops there,
// so the same bits. wasm's f64 add, mul and the f32 <-> f64 conversions are IEEE's, exactly
// rounded to nearest even, and wasm never fuses a multiply into an add, as JavaScript never does.
// The loops run two float64 lanes at a time (f64x2): each lane's operations are the scalar ones,
// exactly rounded the same, so vectors change the speed and not the bits.

let sumW: f64 = 0;
let sumG: f64 = 0;

/**
 * The sums of squares of w[0, len) and of g[0, len) times scale, each in index order in float64
 * (host.ts sumSquares2); read with optimSumW and optimSumG.
 */
export function optimNorms(w: usize, g: usize, len: i32, scale: f64): void {
  // Both chains in one f64x2, lane 0 ww and lane 1 gg: per lane the scalar loop's operations in its order (w times
  // 1 is w itself), four parameters a loop.
  const sc = f64x2(1, scale);
  let acc = f64x2.splat(0);
  const len4 = len & ~3;
  for (let i = 0; i < len4; i += 4) {
    const o = <usize>i * 4;
    const wv = v128.load(w + o), gv = v128.load(g + o);
    const lo = v128.shuffle<f32>(wv, gv, 0, 4, 1, 5), hi = v128.shuffle<f32>(wv, gv, 2, 6, 3, 7);
    let x = f64x2.mul(f64x2.promote_low_f32x4(lo), sc);
    acc = f64x2.add(acc, f64x2.mul(x, x));
    x = f64x2.mul(f64x2.promote_low_f32x4(v128.shuffle<f32>(lo, lo, 2, 3, 0, 1)), sc);
    acc = f64x2.add(acc, f64x2.mul(x, x));
    x = f64x2.mul(f64x2.promote_low_f32x4(hi), sc);
    acc = f64x2.add(acc, f64x2.mul(x, x));
    x = f64x2.mul(f64x2.promote_low_f32x4(v128.shuffle<f32>(hi, hi, 2, 3, 0, 1)), sc);
    acc = f64x2.add(acc, f64x2.mul(x, x));
  }
  let ww = f64x2.extract_lane(acc, 0), gg = f64x2.extract_lane(acc, 1);
  for (let i = len4; i < len; i++) {
    const o = <usize>i * 4;
    const a = <f64>load<f32>(w + o);
    ww += a * a;
    const x = <f64>load<f32>(g + o) * scale;
    gg += x * x;
  }
  sumW = ww;
  sumG = gg;
}

export function optimSumW(): f64 {
  return sumW;
}

export function optimSumG(): f64 {
  return sumG;
}

/**
 * One segment's update of host.ts, in place on w and v over [0, len):
 *   d = g gradScale + beta w;  v = f32(m v + rate d);  w = f32(w - v), or with nesterov f32(w - (m v + rate d)).
 */
export function optimUpdate(w: usize, v: usize, g: usize, len: i32, gradScale: f64, beta: f64, rate: f64, m: f64, nesterov: bool): void {
  // Two parameters a lane pair (f64x2: each lane the scalar operations below, exactly rounded the same), four a loop.
  const vs = f64x2.splat(gradScale), vbeta = f64x2.splat(beta), vr = f64x2.splat(rate), vm = f64x2.splat(m);
  const len4 = len & ~3;
  for (let i = 0; i < len4; i += 4) {
    const o = <usize>i * 4;
    const w4 = v128.load(w + o), g4 = v128.load(g + o), v4 = v128.load(v + o);
    const w0 = f64x2.promote_low_f32x4(w4), w1 = f64x2.promote_low_f32x4(v128.shuffle<f32>(w4, w4, 2, 3, 0, 1));
    const g0 = f64x2.promote_low_f32x4(g4), g1 = f64x2.promote_low_f32x4(v128.shuffle<f32>(g4, g4, 2, 3, 0, 1));
    const u0 = f64x2.promote_low_f32x4(v4), u1 = f64x2.promote_low_f32x4(v128.shuffle<f32>(v4, v4, 2, 3, 0, 1));
    const d0 = f64x2.add(f64x2.mul(g0, vs), f64x2.mul(vbeta, w0)), d1 = f64x2.add(f64x2.mul(g1, vs), f64x2.mul(vbeta, w1));
    const r0 = f64x2.add(f64x2.mul(vm, u0), f64x2.mul(vr, d0)), r1 = f64x2.add(f64x2.mul(vm, u1), f64x2.mul(vr, d1));
    const n0 = f32x4.demote_f64x2_zero(r0), n1 = f32x4.demote_f64x2_zero(r1);
    v128.store(v + o, v128.shuffle<f32>(n0, n1, 0, 1, 4, 5));
    const vi0 = f64x2.promote_low_f32x4(n0), vi1 = f64x2.promote_low_f32x4(n1);
    const s0 = nesterov ? f64x2.add(f64x2.mul(vm, vi0), f64x2.mul(vr, d0)) : vi0;
    const s1 = nesterov ? f64x2.add(f64x2.mul(vm, vi1), f64x2.mul(vr, d1)) : vi1;
    const y0 = f32x4.demote_f64x2_zero(f64x2.sub(w0, s0)), y1 = f32x4.demote_f64x2_zero(f64x2.sub(w1, s1));
    v128.store(w + o, v128.shuffle<f32>(y0, y1, 0, 1, 4, 5));
  }
  for (let i = len4; i < len; i++) {
    const o = <usize>i * 4;
    const wi = <f64>load<f32>(w + o);
    const d = <f64>load<f32>(g + o) * gradScale + beta * wi;
    const vi = <f64><f32>(m * <f64>load<f32>(v + o) + rate * d);
    store<f32>(v + o, <f32>vi);
    store<f32>(w + o, <f32>(nesterov ? wi - (m * vi + rate * d) : wi - vi));
  }
}
