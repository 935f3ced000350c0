// Batch normalisation and local response normalisation, NCHW [N, C, HW], with the formulas
// of shaders/batchnorm.wgsl and shaders/lrn.wgsl. Per-channel reductions: each plane (HW
// values of one sample and channel) is summed in f32x4 lanes, the plane sums in f64, sample
// by sample: a fixed order, and f64 keeps a 65,536-value channel sum accurate.
import { sumPlane } from './eltwise';

/** (l0 + l1) + (l2 + l3): the fixed horizontal sum. */
@inline function lanes(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

/** Sum over the n values at p of (x - m)^2. */
function sumSqDev(p: usize, n: i32, m: f32): f32 {
  const vm = f32x4.splat(m);
  let acc = f32x4.splat(0);
  const n4 = n & ~3;
  for (let j = 0; j < n4; j += 4) {
    const d = f32x4.sub(v128.load(p + <usize>j * 4), vm);
    acc = f32x4.add(acc, f32x4.mul(d, d));
  }
  let s = lanes(acc);
  for (let j = n4; j < n; j++) {
    const d = load<f32>(p + <usize>j * 4) - m;
    s += d * d;
  }
  return s;
}

// The BN output ((x - m) is) g + b, in these operations and this order wherever it is computed: the forward's
// apply, and the backward's ReLU gate, which must see the forward's bits.
@inline function xhat4(x: v128, vm: v128, vis: v128): v128 {
  return f32x4.mul(f32x4.sub(x, vm), vis);
}

@inline function affine4(xhat: v128, vg: v128, vb: v128): v128 {
  return f32x4.add(f32x4.mul(xhat, vg), vb);
}

@inline function xhat1(x: f32, m: f32, is: f32): f32 {
  return (x - m) * is;
}

@inline function affine1(xhat: f32, g: f32, b: f32): f32 {
  return xhat * g + b;
}

@inline function f(p: usize, i: i32): f32 {
  return load<f32>(p + <usize>i * 4);
}

// Batch norm's passes go over the planes in memory order (a thread takes a range of samples): a channel's planes lie a
// tensor's width apart, so channel by channel the reads jump a page or more at every plane. The per-channel sums are
// kept per plane and added afterwards, channel by channel in sample order, as they always were.

/**
 * sums[p] = the sum of plane p of x (sumPlane's order), or with `dev` the sum of (x - mean[c])^2 over it, for the planes
 * [p0, p0 + planes) in order (plane p of channel p % c).
 */
export function batchNormSums(x: usize, p0: i32, planes: i32, c: i32, hw: i32, mean: usize, sums: usize, dev: bool): void {
  for (let p = p0; p < p0 + planes; p++) {
    const q = x + <usize>p * hw * 4;
    store<f32>(sums + <usize>p * 4, dev ? sumSqDev(q, hw, f(mean, p % c)) : sumPlane(q, hw));
  }
}

/** mean[c] from batchNormSums' plane sums (sums [N, C]), accumulated in f64 sample by sample, for channels [c0, c1). */
export function batchNormMean(sums: usize, n: i32, c: i32, hw: i32, mean: usize, c0: i32, c1: i32): void {
  const M = <f64>n * hw;
  for (let ch = c0; ch < c1; ch++) {
    let s: f64 = 0;
    for (let b = 0; b < n; b++) s += <f64>f(sums, b * c + ch);
    store<f32>(mean + <usize>ch * 4, <f32>(s / M));
  }
}

/**
 * Training statistics from batchNormSums' squared deviations (sums [N, C], f64 sample by sample): invstd[c] =
 * 1/sqrt(biased var + eps); running mean and (unbiased, M = 1: 0) variance updated in place with `momentum`. Channels
 * [c0, c1) (each channel's arithmetic is the same whatever range it is computed in: threads split by channel).
 */
export function batchNormVar(sums: usize, n: i32, c: i32, hw: i32, mean: usize, invstd: usize, runMean: usize, runVar: usize, eps: f32,
  momentum: f32, c0: i32, c1: i32): void {
  const M = <f64>n * hw;
  for (let ch = c0; ch < c1; ch++) {
    let ssd: f64 = 0;
    for (let b = 0; b < n; b++) ssd += <f64>f(sums, b * c + ch);
    const o = <usize>ch * 4, m = f(mean, ch);
    store<f32>(invstd + o, <f32>(1 / Math.sqrt(ssd / M + <f64>eps)));
    const unbiased = <f32>(ssd / Math.max(M - 1, 1));
    store<f32>(runMean + o, (1 - momentum) * load<f32>(runMean + o) + momentum * m);
    store<f32>(runVar + o, (1 - momentum) * load<f32>(runVar + o) + momentum * unbiased);
  }
}

/**
 * y = (x - m[c]) * is[c] * gamma[c] + beta[c]; is = stat2 (saved invstd) when mode 0, or
 * 1/sqrt(stat2 + eps) (running variance) when mode 1. y may alias x. Planes [p0, p0 + planes) in order (channel p % c).
 * With `relu`, y = max(that, 0) (NaN giving 0): the ReLU after the BN in the same pass, reluForward's bits.
 */
export function batchNormApply(x: usize, y: usize, p0: i32, planes: i32, c: i32, hw: i32, gamma: usize, beta: usize, m: usize, stat2: usize,
  mode: i32, eps: f32, relu: bool): void {
  for (let p = p0; p < p0 + planes; p++) {
    const ch = p % c;
    const is = mode == 1 ? <f32>1 / Mathf.sqrt(f(stat2, ch) + eps) : f(stat2, ch);
    const mv = f(m, ch), g = f(gamma, ch), bt = f(beta, ch);
    const off = <usize>p * hw * 4;
    // One loop for each case, so the plain BN's has no ReLU test per element.
    if (relu) applyPlane(x + off, y + off, hw, mv, is, g, bt, true);
    else applyPlane(x + off, y + off, hw, mv, is, g, bt, false);
  }
}

/** One plane of batchNormApply: y = ((x - m) is) g + b over hw values, then with `relu` max(that, 0) (NaN giving 0). */
@inline function applyPlane(px: usize, py: usize, hw: i32, mv: f32, is: f32, g: f32, bt: f32, relu: bool): void {
  const zero = f32x4.splat(0), vm = f32x4.splat(mv), vis = f32x4.splat(is), vg = f32x4.splat(g), vb = f32x4.splat(bt);
  const n4 = hw & ~3;
  for (let j = 0; j < n4; j += 4) {
    const o = <usize>j * 4;
    const v = affine4(xhat4(v128.load(px + o), vm, vis), vg, vb);
    v128.store(py + o, relu ? f32x4.pmax(zero, v) : v);
  }
  for (let j = n4; j < hw; j++) {
    const o = <usize>j * 4;
    const v = affine1(xhat1(load<f32>(px + o), mv, is), g, bt);
    store<f32>(py + o, relu ? (v > 0 ? v : 0) : v);
  }
}

/** BN backward's two plane sums, set by planeSums (a module global: each thread has its own instance). */
let sumDy: f32 = 0;
let sumDyX: f32 = 0;

/**
 * sumDy = sum of dy, sumDyX = sum of dy (x - m) over the n values of a plane, one pass, each in the order sumPlane and
 * sumDyDev use (four lanes, (l0 + l1) + (l2 + l3), then the tail). With `gated`, dy is taken as 0 where the BN output
 * ((x - m) is) g + b is not > 0: the gradient through the ReLU after the BN, its output recomputed with the forward's
 * operations (so the same bits, and the same mask, as reluBackward on the stored output).
 */
function planeSums(x: usize, dy: usize, n: i32, m: f32, gated: bool, is: f32, g: f32, b: f32): void {
  const vm = f32x4.splat(m), vis = f32x4.splat(is), vg = f32x4.splat(g), vb = f32x4.splat(b), zero = f32x4.splat(0);
  let a1 = zero, a2 = zero;
  const n4 = n & ~3;
  for (let j = 0; j < n4; j += 4) {
    const o = <usize>j * 4;
    const vx = v128.load(x + o);
    let d = v128.load(dy + o);
    if (gated) d = v128.and(d, f32x4.gt(affine4(xhat4(vx, vm, vis), vg, vb), zero));
    a1 = f32x4.add(a1, d);
    a2 = f32x4.add(a2, f32x4.mul(d, f32x4.sub(vx, vm)));
  }
  let s1 = lanes(a1), s2 = lanes(a2);
  for (let j = n4; j < n; j++) {
    const o = <usize>j * 4;
    const xv = load<f32>(x + o);
    const d: f32 = !gated || affine1(xhat1(xv, m, is), g, b) > 0 ? load<f32>(dy + o) : 0;
    s1 += d;
    s2 += d * (xv - m);
  }
  sumDy = s1;
  sumDyX = s2;
}

/**
 * Backward of the training forward, first pass: for planes [p0, p0 + planes) in order (channel p % c), sums[p] =
 * sum dy and sums[P + p] = sum dy (x - mean) over the plane (P = the planes of the tensor), each in planeSums' order.
 * With `relu`, dy is the gradient of a ReLU after the BN (batchNormApply's relu): taken as 0 where the BN's output
 * (recomputed from x, mean, invstd, gamma and beta) is not > 0, as reluBackward then this backward would take it.
 */
export function batchNormBackwardSums(x: usize, dy: usize, p0: i32, planes: i32, P: i32, c: i32, hw: i32, gamma: usize, beta: usize, mean: usize,
  invstd: usize, relu: bool, sums: usize): void {
  for (let p = p0; p < p0 + planes; p++) {
    const ch = p % c, off = <usize>p * hw * 4;
    planeSums(x + off, dy + off, hw, f(mean, ch), relu, f(invstd, ch), f(gamma, ch), relu ? f(beta, ch) : 0);
    store<f32>(sums + <usize>p * 4, sumDy);
    store<f32>(sums + <usize>(P + p) * 4, sumDyX);
  }
}

/**
 * Per channel [c0, c1), from batchNormBackwardSums' plane sums (f64, sample by sample): sdy = sum dy, sdyx = sum dy (x -
 * mean); dbeta (+)= sdy, dgamma (+)= sdyx invstd; and the constants of dx = k (dy - a - xhat bb) at consts + 12 c: k =
 * gamma invstd, a = sdy / M, bb = sdyx invstd / M.
 */
export function batchNormBackwardReduce(sums: usize, n: i32, c: i32, hw: i32, gamma: usize, invstd: usize, dgamma: usize, dbeta: usize,
  accumulate: bool, c0: i32, c1: i32, consts: usize): void {
  const M = <f32>(<f64>n * hw), P = n * c;
  for (let ch = c0; ch < c1; ch++) {
    let s1: f64 = 0, s2: f64 = 0;
    for (let b = 0; b < n; b++) {
      s1 += <f64>f(sums, b * c + ch);
      s2 += <f64>f(sums, P + b * c + ch);
    }
    const sdy = <f32>s1, sdyx = <f32>s2, is = f(invstd, ch);
    const o = <usize>ch * 4;
    const gx = sdyx * is;
    store<f32>(dbeta + o, accumulate ? load<f32>(dbeta + o) + sdy : sdy);
    store<f32>(dgamma + o, accumulate ? load<f32>(dgamma + o) + gx : gx);
    const q = consts + <usize>ch * 12;
    store<f32>(q, f(gamma, ch) * is);
    store<f32>(q, sdy / M, 4);
    store<f32>(q, gx / M, 8);
  }
}

/**
 * Backward of the training forward, second pass: dx = k (dy - a - xhat bb) with batchNormBackwardReduce's constants, for
 * planes [p0, p0 + planes) in order; with `relu`, dy gated as in batchNormBackwardSums.
 */
export function batchNormBackwardApply(x: usize, dy: usize, dx: usize, p0: i32, planes: i32, c: i32, hw: i32, gamma: usize, beta: usize,
  mean: usize, invstd: usize, relu: bool, consts: usize): void {
  const zero = f32x4.splat(0);
  const n4 = hw & ~3;
  for (let p = p0; p < p0 + planes; p++) {
    const ch = p % c, q = consts + <usize>ch * 12;
    const mv = f(mean, ch), is = f(invstd, ch), g = f(gamma, ch), bt: f32 = relu ? f(beta, ch) : 0;
    const k = load<f32>(q), a = load<f32>(q, 4), bb = load<f32>(q, 8);
    const vk = f32x4.splat(k), va = f32x4.splat(a), vb = f32x4.splat(bb), vm = f32x4.splat(mv), vis = f32x4.splat(is);
    const vg = f32x4.splat(g), vbt = f32x4.splat(bt);
    const off = <usize>p * hw * 4;
    const px = x + off, pdy = dy + off, pdx = dx + off;
    for (let j = 0; j < n4; j += 4) {
      const o = <usize>j * 4;
      const vx = v128.load(px + o);
      const xhat = xhat4(vx, vm, vis);
      let d = v128.load(pdy + o);
      if (relu) d = v128.and(d, f32x4.gt(affine4(xhat, vg, vbt), zero));
      v128.store(pdx + o, f32x4.mul(vk, f32x4.sub(f32x4.sub(d, va), f32x4.mul(xhat, vb))));
    }
    for (let j = n4; j < hw; j++) {
      const o = <usize>j * 4;
      const xhat = xhat1(load<f32>(px + o), mv, is);
      const d: f32 = !relu || affine1(xhat, g, bt) > 0 ? load<f32>(pdy + o) : 0;
      store<f32>(pdx + o, k * (d - a - xhat * bb));
    }
  }
}

// ---- LRN ------------------------------------------------------------------------------------

/** s[c, j] = k + alpha/size * sum of x^2 over channels c - size/2 .. c + (size-1)/2 (one sample). */
function lrnScales(x: usize, s: usize, c: i32, hw: i32, size: i32, alpha: f32, k: f32): void {
  const a = alpha / <f32>size;
  for (let ch = 0; ch < c; ch++) {
    const c0 = max(0, ch - size / 2), c1 = min(c - 1, ch + (size - 1) / 2);
    const ps = s + <usize>ch * hw * 4;
    for (let j = 0; j < hw; j++) {
      let sum: f32 = 0;
      for (let cc = c0; cc <= c1; cc++) {
        const v = load<f32>(x + (<usize>cc * hw + j) * 4);
        sum += v * v;
      }
      store<f32>(ps + <usize>j * 4, k + a * sum);
    }
  }
}

/** y = x * s^(-beta) for n samples of [C, HW]; scratch holds C*HW floats. */
export function lrnForward(x: usize, y: usize, n: i32, c: i32, hw: i32, size: i32, alpha: f32, beta: f32, k: f32, scratch: usize): void {
  const per = c * hw;
  for (let b = 0; b < n; b++) {
    const px = x + <usize>b * per * 4, py = y + <usize>b * per * 4;
    lrnScales(px, scratch, c, hw, size, alpha, k);
    for (let i = 0; i < per; i++) {
      const o = <usize>i * 4;
      store<f32>(py + o, load<f32>(px + o) * Mathf.pow(load<f32>(scratch + o), -beta));
    }
  }
}

/**
 * dx_j = dy_j s_j^(-beta) - 2 alpha beta / size * x_j * sum over c with j in window(c) of
 * dy_c y_c / s_c (y from forward). scratch holds 2*C*HW floats.
 */
export function lrnBackward(x: usize, y: usize, dy: usize, dx: usize, n: i32, c: i32, hw: i32, size: i32, alpha: f32, beta: f32, k: f32, scratch: usize): void {
  const per = c * hw;
  const t = scratch + <usize>per * 4;
  const coef = <f32>2 * alpha * beta / <f32>size;
  for (let b = 0; b < n; b++) {
    const off = <usize>b * per * 4;
    const px = x + off, py = y + off, pdy = dy + off, pdx = dx + off;
    lrnScales(px, scratch, c, hw, size, alpha, k);
    for (let i = 0; i < per; i++) {
      const o = <usize>i * 4;
      store<f32>(t + o, load<f32>(pdy + o) * load<f32>(py + o) / load<f32>(scratch + o));
    }
    for (let ch = 0; ch < c; ch++) {
      const c0 = max(0, ch - (size - 1) / 2), c1 = min(c - 1, ch + size / 2);
      for (let j = 0; j < hw; j++) {
        let sum: f32 = 0;
        for (let cc = c0; cc <= c1; cc++) sum += load<f32>(t + (<usize>cc * hw + j) * 4);
        const o = (<usize>ch * hw + j) * 4;
        store<f32>(pdx + o, load<f32>(pdy + o) * Mathf.pow(load<f32>(scratch + o), -beta) - coef * load<f32>(px + o) * sum);
      }
    }
  }
}
