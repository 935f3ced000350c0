// conv2d, workgroup-TILED implicit GEMM: the variant for real GPUs (src/ops/conv2d.ts picks it
// when the adapter is not a CPU driver). The register-blocked kernels for CPU drivers are in
// conv2d_fwd.wgsl, conv2d_bwd_input.wgsl and conv2d_bwd_filter.wgsl, which define the passes.
// One kernel serves all three passes as C[M, N] = sum_k A[m, k] * B[k, n]; MODE (an override
// constant, so the branches fold away) picks how A and B are gathered and C is stored:
//   MODE 0 forward:         A = w [Cout, Cin*KH*KW], B = x windows,         C -> out
//   MODE 1 backward input:  A = w taps of one stride phase, B = dy gathered, C -> dx (+ beta*dx)
//   MODE 2 backward filter: A = dy [Cout, rows*OW], B = x windows,         C -> slice `split` of dw
// Each workgroup computes a (4*WGY) x (4*WGX) tile of C, stepping K by BK: all threads stage
// BK columns of A and rows of B in workgroup memory, then each thread accumulates a 4x4 block.
// Every element is summed in a fixed order: no atomics, bitwise reproducible.
// Params is the layout shared by all conv kernels (see dispatch() in src/ops/conv2d.ts).

override MODE: u32 = 0u;
override WGX: u32 = 16u;
override WGY: u32 = 16u;
override BK: u32 = 16u;

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, oh: u32, ow: u32,
  kh: u32, kw: u32, sh: u32, sw: u32, ph: u32, pw: u32,
  mBlocks: u32, nBlocks: u32,             // tiles along M and N
  splits: u32, rowsPerSplit: u32,
  beta: f32,
  iy0: u32, ix0: u32, hp: u32, wp: u32,   // backward-input phase (see conv2d_bwd_input.wgsl)
  ry: u32, rx: u32, th: u32, tw: u32, ch: u32, cw: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> inA: array<f32>;   // w (MODE 0, 1) or dy (MODE 2)
@group(0) @binding(2) var<storage, read> inB: array<f32>;   // x (MODE 0, 2) or dy (MODE 1)
@group(0) @binding(3) var<storage, read_write> outC: array<f32>;

var<workgroup> As: array<f32, BK * WGY * 4u>;   // [BK][4*WGY]
var<workgroup> Bs: array<f32, BK * WGX * 4u>;   // [BK][4*WGX]

fn dims() -> vec3u {   // M, N, K
  let kk = p.kh * p.kw;
  if (MODE == 0u) { return vec3u(p.cout, p.n * p.oh * p.ow, p.cin * kk); }
  if (MODE == 1u) { return vec3u(p.cin, p.n * p.hp * p.wp, p.cout * p.th * p.tw); }
  return vec3u(p.cout, p.cin * kk, p.rowsPerSplit * p.ow);
}

// x[b, ci, oy*sh - ph + ky, ox*sw - pw + kx], zero outside the image.
fn window(b: u32, ci: u32, oy: u32, ox: u32, ky: u32, kx: u32) -> f32 {
  let iy = i32(oy * p.sh + ky) - i32(p.ph);
  let ix = i32(ox * p.sw + kx) - i32(p.pw);
  if (iy < 0 || iy >= i32(p.h) || ix < 0 || ix >= i32(p.w)) { return 0.0; }
  return inB[((b * p.cin + ci) * p.h + u32(iy)) * p.w + u32(ix)];
}

fn loadA(m: u32, k: u32, split: u32) -> f32 {
  let d = dims();
  if (m >= d.x || k >= d.z) { return 0.0; }
  if (MODE == 0u) { return inA[m * d.z + k]; }
  if (MODE == 1u) {
    let t = k % (p.th * p.tw);
    let ky = p.ry + (t / p.tw) * p.sh;
    let kx = p.rx + (t % p.tw) * p.sw;
    return inA[((k / (p.th * p.tw) * p.cin + m) * p.kh + ky) * p.kw + kx];
  }
  let r = split * p.rowsPerSplit + k / p.ow;
  if (r >= p.n * p.oh) { return 0.0; }
  return inA[((r / p.oh * p.cout + m) * p.oh + r % p.oh) * p.ow + k % p.ow];
}

fn loadB(k: u32, n: u32, split: u32) -> f32 {
  let d = dims();
  if (k >= d.z || n >= d.y) { return 0.0; }
  let kk = p.kh * p.kw;
  if (MODE == 0u) {
    let q = n % (p.oh * p.ow);
    return window(n / (p.oh * p.ow), k / kk, q / p.ow, q % p.ow, (k % kk) / p.kw, k % p.kw);
  }
  if (MODE == 1u) {
    let pp = p.hp * p.wp;
    let t = k % (p.th * p.tw);
    let oy = i32(p.ch + (n % pp) / p.wp) - i32(t / p.tw);
    let ox = i32(p.cw + n % p.wp) - i32(t % p.tw);
    if (oy < 0 || oy >= i32(p.oh) || ox < 0 || ox >= i32(p.ow)) { return 0.0; }
    return inB[((n / pp * p.cout + k / (p.th * p.tw)) * p.oh + u32(oy)) * p.ow + u32(ox)];
  }
  let r = split * p.rowsPerSplit + k / p.ow;
  if (r >= p.n * p.oh) { return 0.0; }
  return window(r / p.oh, n / kk, r % p.oh, k % p.ow, (n % kk) / p.kw, n % p.kw);
}

fn store(m: u32, n: u32, split: u32, v: f32) {
  let d = dims();
  if (m >= d.x || n >= d.y) { return; }
  var i: u32;
  if (MODE == 0u) {
    let op = p.oh * p.ow;
    i = (n / op * p.cout + m) * op + n % op;
  } else if (MODE == 1u) {
    let pp = p.hp * p.wp;
    let q = n % pp;
    i = ((n / pp * p.cin + m) * p.h + p.iy0 + (q / p.wp) * p.sh) * p.w + p.ix0 + (q % p.wp) * p.sw;
  } else {
    i = (split * d.x + m) * d.y + n;
  }
  var r = v;
  if (p.beta != 0.0) { r += p.beta * outC[i]; }
  outC[i] = r;
}

@compute @workgroup_size(WGX, WGY)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let f = wid.x + wid.y * nwg.x;
  let tiles = p.mBlocks * p.nBlocks;
  // Uniform per workgroup, so returning here cannot split a barrier.
  if (f >= tiles * p.splits) { return; }
  let split = f / tiles;
  let m0 = ((f % tiles) / p.nBlocks) * 4u * WGY;
  let n0 = (f % p.nBlocks) * 4u * WGX;
  let tm = 4u * WGY;
  let tn = 4u * WGX;
  let lid = lid3.y * WGX + lid3.x;
  let threads = WGX * WGY;
  let K = dims().z;
  var acc: array<vec4f, 4>;
  for (var k0 = 0u; k0 < K; k0 += BK) {
    for (var e = lid; e < tm * BK; e += threads) {
      As[(e % BK) * tm + e / BK] = loadA(m0 + e / BK, k0 + e % BK, split);
    }
    for (var e = lid; e < tn * BK; e += threads) {
      Bs[e] = loadB(k0 + e / tn, n0 + e % tn, split);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      let a = vec4f(As[kk * tm + lid3.y * 4u], As[kk * tm + lid3.y * 4u + 1u], As[kk * tm + lid3.y * 4u + 2u], As[kk * tm + lid3.y * 4u + 3u]);
      let b = vec4f(Bs[kk * tn + lid3.x * 4u], Bs[kk * tn + lid3.x * 4u + 1u], Bs[kk * tn + lid3.x * 4u + 2u], Bs[kk * tn + lid3.x * 4u + 3u]);
      for (var i = 0u; i < 4u; i++) { acc[i] = fma(vec4f(a[i]), b, acc[i]); }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) {
      store(m0 + lid3.y * 4u + i, n0 + lid3.x * 4u + j, split, acc[i][j]);
    }
  }
}
