// GEMM: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b], row-major, batched over b.
//   op(A) is M x K: A stored [M, K], or [K, M] when TRANS_A.
//   op(B) is K x N: B stored [K, N], or [N, K] when TRANS_B.
// Two entry points for two kinds of hardware (chosen per adapter, src/gpu/tune.ts):
//  - `blocked`: register blocking, no workgroup memory. Each invocation owns a TM x TN block
//    of C (TN = 4 or 8 as vec4s) and streams K. On CPU drivers (llvmpipe, SwiftShader) the
//    workgroup's invocations become SIMD lanes and barriers are expensive, so this is 2-3x
//    faster than tiling there (RECIPES.md).
//  - `tiled`: classic workgroup-memory tiling (64x64 tile, BK = 16, 16x16 invocations each
//    4x4), what real GPUs want: every A/B element is fetched from memory once per tile.
//  - `tiled8` (at the end): 128x128 tiles, 8x8 per invocation, for GPUs with room for it.
// Leading dimensions and offsets let one call work on a sub-block of larger matrices: that is
// how src/ops/gemm.ts splits operands larger than one storage binding (AlexNet's fc6 weight,
// 151 MB, is larger than llvmpipe's 128 MiB binding limit).
// Binding convention: 0 = uniforms, 1 = A, 2 = B, 3 = C (read when beta != 0).

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override TM: u32 = 4;      // rows of C per invocation (blocked), 1..8
override TN: u32 = 8;      // cols of C per invocation (blocked), 4 or 8
override WGX: u32 = 16;    // invocations along N (blocked)
override WGY: u32 = 4;     // invocations along M (blocked)

struct Params {
  M: u32, N: u32, K: u32,
  lda: u32, ldb: u32, ldc: u32,              // row strides (elements) of the stored matrices
  offA: u32, offB: u32, offC: u32,           // element offsets inside the bindings
  strideA: u32, strideB: u32, strideC: u32,  // elements between batch items
  alpha: f32, beta: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

fn idxA(m: u32, k: u32) -> u32 {
  if (TRANS_A) { return p.offA + k * p.lda + m; }
  return p.offA + m * p.lda + k;
}

fn idxB(k: u32, n: u32) -> u32 {
  if (TRANS_B) { return p.offB + n * p.ldb + k; }
  return p.offB + k * p.ldb + n;
}

fn store(base: u32, m: u32, n: u32, v: f32) {
  if (m < p.M && n < p.N) {
    let i = base + p.offC + m * p.ldc + n;
    var r = p.alpha * v;
    // Read C only when beta != 0, so garbage (NaN) in a fresh output never leaks in.
    if (p.beta != 0.0) { r += p.beta * C[i]; }
    C[i] = r;
  }
}

@compute @workgroup_size(WGX, WGY, 1)
fn blocked(@builtin(global_invocation_id) gid: vec3u) {
  let n0 = gid.x * TN;
  let m0 = gid.y * TM;
  if (n0 >= p.N || m0 >= p.M) { return; }
  let aBase = gid.z * p.strideA;
  let bBase = gid.z * p.strideB;
  // Out-of-range rows/cols are clamped for loading (always in bounds) and masked at store.
  var rows: array<u32, 8>;
  for (var i = 0u; i < TM; i++) { rows[i] = min(m0 + i, p.M - 1u); }
  var cols: array<u32, 8>;
  for (var j = 0u; j < TN; j++) { cols[j] = min(n0 + j, p.N - 1u); }
  var acc0: array<vec4f, 8>;  // columns n0..n0+3 for each of the TM rows
  var acc1: array<vec4f, 8>;  // columns n0+4..n0+7 (TN = 8)
  for (var k = 0u; k < p.K; k++) {
    let b0 = vec4f(B[bBase + idxB(k, cols[0])], B[bBase + idxB(k, cols[1])], B[bBase + idxB(k, cols[2])], B[bBase + idxB(k, cols[3])]);
    var b1 = vec4f(0.0);
    if (TN > 4u) {
      b1 = vec4f(B[bBase + idxB(k, cols[4])], B[bBase + idxB(k, cols[5])], B[bBase + idxB(k, cols[6])], B[bBase + idxB(k, cols[7])]);
    }
    for (var i = 0u; i < TM; i++) {
      let a = A[aBase + idxA(rows[i], k)];
      acc0[i] = fma(vec4f(a), b0, acc0[i]);
      if (TN > 4u) { acc1[i] = fma(vec4f(a), b1, acc1[i]); }
    }
  }
  let cBase = gid.z * p.strideC;
  for (var i = 0u; i < TM; i++) {
    for (var j = 0u; j < 4u; j++) { store(cBase, m0 + i, n0 + j, acc0[i][j]); }
    if (TN > 4u) {
      for (var j = 0u; j < 4u; j++) { store(cBase, m0 + i, n0 + 4u + j, acc1[i][j]); }
    }
  }
}

const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;
var<workgroup> tileA: array<f32, 1024>;  // BM * BK, [k][m]
var<workgroup> tileB: array<f32, 1024>;  // BK * BN, [k][n]

@compute @workgroup_size(16, 16, 1)
fn tiled(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(local_invocation_index) li: u32) {
  let mT = wid.y * BM;
  let nT = wid.x * BN;
  let aBase = wid.z * p.strideA;
  let bBase = wid.z * p.strideB;
  var acc: array<vec4f, 4>;
  let tiles = (p.K + BK - 1u) / BK;
  for (var t = 0u; t < tiles; t++) {
    let k0 = t * BK;
    // 256 invocations load 1024 elements of each tile: 4 each, zero-filled past the edges.
    for (var r = 0u; r < 4u; r++) {
      let e = li + r * 256u;
      let kk = e / BM;
      let mm = e % BM;
      var va = 0.0;
      if (mT + mm < p.M && k0 + kk < p.K) { va = A[aBase + idxA(mT + mm, k0 + kk)]; }
      tileA[kk * BM + mm] = va;
      let nn = e % BN;
      var vb = 0.0;
      if (nT + nn < p.N && k0 + kk < p.K) { vb = B[bBase + idxB(k0 + kk, nT + nn)]; }
      tileB[kk * BN + nn] = vb;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      let b = vec4f(tileB[kk * BN + lid.x * 4u], tileB[kk * BN + lid.x * 4u + 1u], tileB[kk * BN + lid.x * 4u + 2u], tileB[kk * BN + lid.x * 4u + 3u]);
      for (var i = 0u; i < 4u; i++) {
        acc[i] = fma(vec4f(tileA[kk * BM + lid.y * 4u + i]), b, acc[i]);
      }
    }
    workgroupBarrier();
  }
  let cBase = wid.z * p.strideC;
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) { store(cBase, mT + lid.y * 4u + i, nT + lid.x * 4u + j, acc[i][j]); }
  }
}

// `blocked4`: the register-blocked kernel for the common case op(A) = A, op(B) = B with K, N,
// leading dimensions and offsets all multiples of 4. A is read as vec4 along K and B as vec4
// along N, four K at a time: a TM x 8 block per invocation, 4x fewer loads than `blocked`.
// (Same bindings as A and B, viewed as vec4; only one view is used per entry point.)
@group(0) @binding(1) var<storage, read> A4: array<vec4f>;
@group(0) @binding(2) var<storage, read> B4: array<vec4f>;

@compute @workgroup_size(WGX, WGY, 1)
fn blocked4(@builtin(global_invocation_id) gid: vec3u) {
  let n0 = gid.x * 8u;
  let m0 = gid.y * TM;
  if (n0 >= p.N || m0 >= p.M) { return; }
  let aBase = (gid.z * p.strideA + p.offA) / 4u;
  let bBase = (gid.z * p.strideB + p.offB) / 4u;
  let lda4 = p.lda / 4u;
  let ldb4 = p.ldb / 4u;
  // Column quads: the second one is clamped when N is a multiple of 4 but not of 8.
  let q0 = n0 / 4u;
  let q1 = min(n0 + 4u, p.N - 4u) / 4u;
  var rowBase: array<u32, 8>;
  for (var i = 0u; i < TM; i++) { rowBase[i] = aBase + min(m0 + i, p.M - 1u) * lda4; }
  var acc0: array<vec4f, 8>;
  var acc1: array<vec4f, 8>;
  let K4 = p.K / 4u;
  for (var k4 = 0u; k4 < K4; k4++) {
    let r = bBase + k4 * 4u * ldb4;
    let b00 = B4[r + q0];
    let b01 = B4[r + q1];
    let b10 = B4[r + ldb4 + q0];
    let b11 = B4[r + ldb4 + q1];
    let b20 = B4[r + 2u * ldb4 + q0];
    let b21 = B4[r + 2u * ldb4 + q1];
    let b30 = B4[r + 3u * ldb4 + q0];
    let b31 = B4[r + 3u * ldb4 + q1];
    for (var i = 0u; i < TM; i++) {
      let a = A4[rowBase[i] + k4];
      acc0[i] = fma(vec4f(a.x), b00, fma(vec4f(a.y), b10, fma(vec4f(a.z), b20, fma(vec4f(a.w), b30, acc0[i]))));
      acc1[i] = fma(vec4f(a.x), b01, fma(vec4f(a.y), b11, fma(vec4f(a.z), b21, fma(vec4f(a.w), b31, acc1[i]))));
    }
  }
  let cBase = gid.z * p.strideC;
  for (var i = 0u; i < TM; i++) {
    for (var j = 0u; j < 4u; j++) { store(cBase, m0 + i, n0 + j, acc0[i][j]); }
    for (var j = 0u; j < 4u; j++) { store(cBase, m0 + i, n0 + 4u + j, acc1[i][j]); }
  }
}

// `blocked4t`: op(B) = B^T (B stored [N, K], what a linear layer's forward x W^T reads) with
// K, leading dimensions and offsets multiples of 4. Both operands are read as vec4 along K;
// each invocation owns TM rows x 4 columns and accumulates dot products.
@compute @workgroup_size(WGX, WGY, 1)
fn blocked4t(@builtin(global_invocation_id) gid: vec3u) {
  let n0 = gid.x * 4u;
  let m0 = gid.y * TM;
  if (n0 >= p.N || m0 >= p.M) { return; }
  let aBase = (gid.z * p.strideA + p.offA) / 4u;
  let bBase = (gid.z * p.strideB + p.offB) / 4u;
  let lda4 = p.lda / 4u;
  let ldb4 = p.ldb / 4u;
  var rowBase: array<u32, 8>;
  for (var i = 0u; i < TM; i++) { rowBase[i] = aBase + min(m0 + i, p.M - 1u) * lda4; }
  let c0 = bBase + min(n0, p.N - 1u) * ldb4;
  let c1 = bBase + min(n0 + 1u, p.N - 1u) * ldb4;
  let c2 = bBase + min(n0 + 2u, p.N - 1u) * ldb4;
  let c3 = bBase + min(n0 + 3u, p.N - 1u) * ldb4;
  var acc: array<vec4f, 8>;
  let K4 = p.K / 4u;
  for (var k4 = 0u; k4 < K4; k4++) {
    let b0 = B4[c0 + k4];
    let b1 = B4[c1 + k4];
    let b2 = B4[c2 + k4];
    let b3 = B4[c3 + k4];
    for (var i = 0u; i < TM; i++) {
      let a = A4[rowBase[i] + k4];
      acc[i] += vec4f(dot(a, b0), dot(a, b1), dot(a, b2), dot(a, b3));
    }
  }
  let cBase = gid.z * p.strideC;
  for (var i = 0u; i < TM; i++) {
    for (var j = 0u; j < 4u; j++) { store(cBase, m0 + i, n0 + j, acc[i][j]); }
  }
}

// `tiled8`: for real GPUs. A 128 x 128 tile of C per workgroup of 16 x 16 invocations, each
// owning an 8 x 8 block in registers (2D register tiling: 16 FMAs per 4 workgroup-memory loads,
// where `tiled` does 4 per 5). K advances 16 at a time through 16 KiB of workgroup memory
// (BK x 128 of A and of B, as vec4 along M and N). Any transposes, any edges: loads are
// clamped and zero-filled, stores masked. The reduction over k runs in index order inside
// each invocation, as in every other variant.
const BM8: u32 = 128u;
const BN8: u32 = 128u;
const BK8: u32 = 16u;
var<workgroup> tA8: array<vec4f, 512>;  // [k][m / 4]: BK8 x BM8 / 4
var<workgroup> tB8: array<vec4f, 512>;  // [k][n / 4]: BK8 x BN8 / 4

fn loadA8(base: u32, m: u32, k: u32) -> f32 {
  if (m < p.M && k < p.K) { return A[base + idxA(m, k)]; }
  return 0.0;
}

fn loadB8(base: u32, k: u32, n: u32) -> f32 {
  if (k < p.K && n < p.N) { return B[base + idxB(k, n)]; }
  return 0.0;
}

@compute @workgroup_size(16, 16, 1)
fn tiled8(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(local_invocation_index) li: u32) {
  let mT = wid.y * BM8;
  let nT = wid.x * BN8;
  let aBase = wid.z * p.strideA;
  let bBase = wid.z * p.strideB;
  var acc: array<vec4f, 16>;  // row i: acc[2i] columns 0..3, acc[2i + 1] columns 4..7
  let tiles = (p.K + BK8 - 1u) / BK8;
  for (var t = 0u; t < tiles; t++) {
    let k0 = t * BK8;
    // 256 invocations fill 512 vec4 of each tile: two each, four consecutive m (or n) per vec4.
    for (var r = 0u; r < 2u; r++) {
      let e = li + r * 256u;
      let kk = e / 32u;
      let q = (e % 32u) * 4u;
      let k = k0 + kk;
      tA8[e] = vec4f(loadA8(aBase, mT + q, k), loadA8(aBase, mT + q + 1u, k), loadA8(aBase, mT + q + 2u, k), loadA8(aBase, mT + q + 3u, k));
      tB8[e] = vec4f(loadB8(bBase, k, nT + q), loadB8(bBase, k, nT + q + 1u), loadB8(bBase, k, nT + q + 2u), loadB8(bBase, k, nT + q + 3u));
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK8; kk++) {
      let a0 = tA8[kk * 32u + lid.y * 2u];
      let a1 = tA8[kk * 32u + lid.y * 2u + 1u];
      let b0 = tB8[kk * 32u + lid.x * 2u];
      let b1 = tB8[kk * 32u + lid.x * 2u + 1u];
      for (var i = 0u; i < 4u; i++) {
        acc[2u * i] = fma(vec4f(a0[i]), b0, acc[2u * i]);
        acc[2u * i + 1u] = fma(vec4f(a0[i]), b1, acc[2u * i + 1u]);
        acc[2u * i + 8u] = fma(vec4f(a1[i]), b0, acc[2u * i + 8u]);
        acc[2u * i + 9u] = fma(vec4f(a1[i]), b1, acc[2u * i + 9u]);
      }
    }
    workgroupBarrier();
  }
  let cBase = wid.z * p.strideC;
  let m0 = mT + lid.y * 8u;
  let n0 = nT + lid.x * 8u;
  for (var i = 0u; i < 8u; i++) {
    for (var j = 0u; j < 4u; j++) {
      store(cBase, m0 + i, n0 + j, acc[2u * i][j]);
      store(cBase, m0 + i, n0 + 4u + j, acc[2u * i + 1u][j]);
    }
  }
}
