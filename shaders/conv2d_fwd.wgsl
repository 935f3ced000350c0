// conv2d forward as a register-blocked implicit GEMM (no im2col buffer), NCHW:
//   out[n, co, oh, ow] = sum_{ky, kx, ci} x[n, ci, oh*sh - ph + ky, ow*sw - pw + kx] * w[co, ci, ky, kx]
// GEMM view: M = Cout, N = batch*OH*OW output positions, K = Cin*KH*KW.
// Each invocation owns BM output channels x 4 output positions (the 4 lanes of a vec4), keeps
// the BM vec4 accumulators in registers and streams K: per step it loads BM weights and 4
// inputs for 4*BM multiply-adds. No workgroup memory: on CPU drivers the workgroup's
// invocations are SIMD lanes and barriers cost more than the loads they save (RECIPES.md).
// The bounds test for padding is computed once per (ky, kx) and reused over all Cin.
// Sum order is fixed (ky, kx, ci): the same inputs always give bitwise the same output.
// Loop iterations per invocation, about KH*KW*Cin, must stay under llvmpipe's 65535 per
// invocation (the host checks; see LOOP_BUDGET in src/ops/conv2d.ts).
// Invocation -> (channel block, position block) with positions fastest, so neighbouring
// lanes read neighbouring pixels and share weights. Folded 1D dispatch: flat id = wid.x + wid.y * nwg.x.

override WG: u32 = 64;
override BM: u32 = 8;      // output channels per invocation, 1..MAX_BM
// Loops over acc run to MAX_BM (its length) and test i < BM inside: Mesa unrolls a loop fully
// only when its trip count equals the length of the array it indexes, and only an unrolled
// loop keeps acc in registers (measured: BM = 16 of 32 without this was 2x slower).
const MAX_BM: u32 = 32u;

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, oh: u32, ow: u32,
  kh: u32, kw: u32, sh: u32, sw: u32, ph: u32, pw: u32,
  mBlocks: u32, nBlocks: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> wt: array<f32>;   // the GEMM's A operand first, as in conv2d.wgsl
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let gid = (wid.x + wid.y * nwg.x) * WG + lid;
  if (gid >= p.mBlocks * p.nBlocks) { return; }
  let nb = gid % p.nBlocks;
  let co0 = (gid / p.nBlocks) * BM;

  let P = p.oh * p.ow;
  let total = p.n * P;
  let HW = p.h * p.w;
  // Per lane: the top-left input position of its window, the image base, and the output index.
  var valid: vec4<bool>;
  var iy0: vec4i;
  var ix0: vec4i;
  var xbase: vec4i;
  var obase: vec4u;
  for (var j = 0u; j < 4u; j++) {
    let q = nb * 4u + j;
    valid[j] = q < total;
    let qq = min(q, total - 1u);
    let b = qq / P;
    let r = qq % P;
    iy0[j] = i32((r / p.ow) * p.sh) - i32(p.ph);
    ix0[j] = i32((r % p.ow) * p.sw) - i32(p.pw);
    xbase[j] = i32(b * p.cin * HW);
    obase[j] = b * p.cout * P + r;
  }

  var acc: array<vec4f, MAX_BM>;
  let kk = p.kh * p.kw;
  let wstride = p.cin * kk;           // elements between output channels in w
  let wlast = p.cout * wstride - 1u;  // clamp: rows past Cout read a valid weight and are never stored
  let H = i32(p.h);
  let W = i32(p.w);
  for (var ky = 0u; ky < p.kh; ky++) {
    let iy = iy0 + vec4i(i32(ky));
    let rowOk = valid & (iy >= vec4i(0)) & (iy < vec4i(H));
    for (var kx = 0u; kx < p.kw; kx++) {
      let ix = ix0 + vec4i(i32(kx));
      let ok = rowOk & (ix >= vec4i(0)) & (ix < vec4i(W));
      // Out-of-image lanes read element 0 of their image (always valid) and are zeroed by select.
      let xo = vec4u(select(xbase, xbase + iy * W + ix, ok));
      var wo = co0 * wstride + ky * p.kw + kx;
      for (var ci = 0u; ci < p.cin; ci++) {
        let c = ci * HW;
        let xv = select(vec4f(0.0), vec4f(x[xo.x + c], x[xo.y + c], x[xo.z + c], x[xo.w + c]), ok);
        for (var i = 0u; i < MAX_BM; i++) {
          if (i < BM) { acc[i] = fma(vec4f(wt[min(wo + i * wstride, wlast)]), xv, acc[i]); }
        }
        wo += kk;
      }
    }
  }

  for (var i = 0u; i < MAX_BM; i++) {
    let co = co0 + i;
    for (var j = 0u; j < 4u; j++) {
      if (co < p.cout && i < BM && valid[j]) { out[obase[j] + co * P] = acc[i][j]; }
    }
  }
}
