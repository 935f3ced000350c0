// Element-wise kernels over flat f32 arrays (any alignment): add, fill, ReLU, per-channel bias,
// dropout. f32x4 main loops, scalar tails; each element's result does not depend on the loop
// split, so outputs are identical to a scalar loop (bias backward sums in a fixed order).

/** z = x + y (n elements). z may alias x or y. */
export function add(x: usize, y: usize, z: usize, n: i32): void {
  const n4 = n & ~3;
  for (let i = 0; i < n4; i += 4) {
    const o = <usize>i * 4;
    v128.store(z + o, f32x4.add(v128.load(x + o), v128.load(y + o)));
  }
  for (let i = n4; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(z + o, load<f32>(x + o) + load<f32>(y + o));
  }
}

/** x = value (n elements; the bits of value, so also for i32/u32 tensors). */
export function fill(x: usize, bits: u32, n: i32): void {
  const v = i32x4.splat(bits);
  const n4 = n & ~3;
  for (let i = 0; i < n4; i += 4) v128.store(x + <usize>i * 4, v);
  for (let i = n4; i < n; i++) store<u32>(x + <usize>i * 4, bits);
}

/** y = x > 0 ? x : 0 (NaN gives 0, as the reference's comparison does). */
export function reluForward(x: usize, y: usize, n: i32): void {
  const zero = f32x4.splat(0);
  const n4 = n & ~3;
  for (let i = 0; i < n4; i += 4) {
    const o = <usize>i * 4;
    v128.store(y + o, f32x4.pmax(zero, v128.load(x + o)));
  }
  for (let i = n4; i < n; i++) {
    const o = <usize>i * 4;
    const v = load<f32>(x + o);
    store<f32>(y + o, v > 0 ? v : 0);
  }
}

/** dx = x > 0 ? dy : 0. */
export function reluBackward(x: usize, dy: usize, dx: usize, n: i32): void {
  const zero = f32x4.splat(0);
  const n4 = n & ~3;
  for (let i = 0; i < n4; i += 4) {
    const o = <usize>i * 4;
    v128.store(dx + o, v128.and(v128.load(dy + o), f32x4.gt(v128.load(x + o), zero)));
  }
  for (let i = n4; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(dx + o, load<f32>(x + o) > 0 ? load<f32>(dy + o) : 0);
  }
}

/** x[n, c, j] += b[c] for x [N, C, HW]. */
export function biasAddInPlace(x: usize, b: usize, n: i32, c: i32, hw: i32): void {
  biasApply(x, b, x, n, c, hw, false);
}

/** Sum of n floats at p: four f32x4 lanes in order, then (l0 + l1) + (l2 + l3), then the tail. */
export function sumPlane(p: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  const n4 = n & ~3;
  for (let j = 0; j < n4; j += 4) acc = f32x4.add(acc, v128.load(p + <usize>j * 4));
  let s = (f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1)) + (f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3));
  for (let j = n4; j < n; j++) s += load<f32>(p + <usize>j * 4);
  return s;
}

/** db[c] (+)= sum over n and j of dy[n, c, j]; plane sums accumulate in f64, sample by sample. */
export function biasBackward(dy: usize, db: usize, n: i32, c: i32, hw: i32, accumulate: bool, c0: i32, c1: i32): void {
  for (let ch = c0; ch < c1; ch++) {
    let s: f64 = 0;
    for (let b = 0; b < n; b++) s += <f64>sumPlane(dy + (<usize>(b * c + ch) * hw) * 4, hw);
    const p = db + <usize>ch * 4;
    store<f32>(p, accumulate ? load<f32>(p) + <f32>s : <f32>s);
  }
}

// ---- a bias and the ReLU after it, fused (src/nn/model.ts fuses conv/linear -> ReLU) --------------

/**
 * y[n, c, j] = max(x[n, c, j] + b[c], 0), NaN giving 0, for x [N, C, HW] (x unchanged): biasAddInPlace then
 * reluForward in one pass over memory, with their bits.
 */
export function biasRelu(x: usize, b: usize, y: usize, n: i32, c: i32, hw: i32): void {
  biasApply(x, b, y, n, c, hw, true);
}

/** y[n, c, j] = x[n, c, j] + b[c] (y may be x), then with `relu` max(that, 0) as reluForward takes it (NaN giving 0). */
@inline function biasApply(x: usize, b: usize, y: usize, n: i32, c: i32, hw: i32, relu: bool): void {
  let p: usize = 0;
  for (let s = 0; s < n; s++) {
    if (hw == 1) {
      // [N, F]: the sample's row of c values against b as a whole.
      addRelu(x + p, b, y + p, c, 0, true, relu);
      p += <usize>c * 4;
      continue;
    }
    for (let ch = 0; ch < c; ch++) {
      addRelu(x + p, 0, y + p, hw, load<f32>(b + <usize>ch * 4), false, relu);
      p += <usize>hw * 4;
    }
  }
}

/** y[j] = x[j] + (b[j] when `vector`, else bv) over n values, then with `relu` max(that, 0) (NaN giving 0). */
@inline function addRelu(x: usize, b: usize, y: usize, n: i32, bv: f32, vector: bool, relu: bool): void {
  const zero = f32x4.splat(0), vb = f32x4.splat(bv);
  const n4 = n & ~3;
  for (let j = 0; j < n4; j += 4) {
    const o = <usize>j * 4;
    const v = f32x4.add(v128.load(x + o), vector ? v128.load(b + o) : vb);
    v128.store(y + o, relu ? f32x4.pmax(zero, v) : v);
  }
  for (let j = n4; j < n; j++) {
    const o = <usize>j * 4;
    const v = load<f32>(x + o) + (vector ? load<f32>(b + o) : bv);
    store<f32>(y + o, relu ? (v > 0 ? v : 0) : v);
  }
}

/** dx = y > 0 ? dy : 0 over one plane of n floats, returning the sum of dx in sumPlane's order. */
@inline export function maskPlane(y: usize, dy: usize, dx: usize, n: i32): f32 {
  const zero = f32x4.splat(0);
  let acc = zero;
  const n4 = n & ~3;
  for (let j = 0; j < n4; j += 4) {
    const o = <usize>j * 4;
    const v = v128.and(v128.load(dy + o), f32x4.gt(v128.load(y + o), zero));
    v128.store(dx + o, v);
    acc = f32x4.add(acc, v);
  }
  let s = (f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1)) + (f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3));
  for (let j = n4; j < n; j++) {
    const o = <usize>j * 4;
    const v: f32 = load<f32>(y + o) > 0 ? load<f32>(dy + o) : 0;
    store<f32>(dx + o, v);
    s += v;
  }
  return s;
}

/**
 * The backward of biasRelu for channels [c0, c1) of [N, C, HW]: dx = y > 0 ? dy : 0 (y the ReLU's output, > 0
 * exactly where its input is), and db[c] (+)= the sum of dx over n and j. reluBackward then biasBackward in one pass,
 * with their bits (the plane sums in sumPlane's order, accumulated in f64 sample by sample).
 */
export function reluBiasBackward(y: usize, dy: usize, dx: usize, db: usize, n: i32, c: i32, hw: i32, accumulate: bool, c0: i32, c1: i32): void {
  for (let ch = c0; ch < c1; ch++) {
    let s: f64 = 0;
    for (let b = 0; b < n; b++) {
      const off = <usize>(b * c + ch) * hw * 4;
      s += <f64>maskPlane(y + off, dy + off, dx + off, hw);
    }
    const p = db + <usize>ch * 4;
    store<f32>(p, accumulate ? load<f32>(p) + <f32>s : <f32>s);
  }
}

// ---- dropout: the hash of shaders/dropout.wgsl on four lanes ------------------------------

@inline function mix4(v: v128): v128 {
  let x = v128.xor(v, i32x4.shr_u(v, 16));
  x = i32x4.mul(x, i32x4.splat(0x7feb352d));
  x = v128.xor(x, i32x4.shr_u(x, 15));
  x = i32x4.mul(x, i32x4.splat(0x846ca68b));
  return v128.xor(x, i32x4.shr_u(x, 16));
}

@inline function mix(v: u32): u32 {
  let x = v ^ (v >> 16);
  x *= 0x7feb352d;
  x ^= x >> 15;
  x *= 0x846ca68b;
  return x ^ (x >> 16);
}

/** out[i] = inp[i] * scale where bits(seed, i) >= threshold, else 0 (forward and backward). */
export function dropout(inp: usize, out: usize, n: i32, seed: u32, threshold: u32, scale: f32): void {
  const key = mix(seed + 0x9e3779b9);
  const vkey = i32x4.splat(key);
  const vthr = i32x4.splat(threshold);
  const vscale = f32x4.splat(scale);
  let idx = i32x4(0, 1, 2, 3);
  const four = i32x4.splat(4);
  const n4 = n & ~3;
  for (let i = 0; i < n4; i += 4) {
    const bits = mix4(i32x4.add(mix4(v128.xor(idx, vkey)), vkey));
    const o = <usize>i * 4;
    v128.store(out + o, v128.and(f32x4.mul(v128.load(inp + o), vscale), i32x4.ge_u(bits, vthr)));
    idx = i32x4.add(idx, four);
  }
  for (let i = n4; i < n; i++) {
    const bits = mix(mix(<u32>i ^ key) + key);
    const o = <usize>i * 4;
    store<f32>(out + o, bits >= threshold ? load<f32>(inp + o) * scale : 0);
  }
}
