// conv2d backward to the filter, NCHW, weights [Cout, Cin, KH, KW]:
//   dw[co, ci, ky, kx] = sum_{n, oy, ox} dy[n, co, oy, ox] * x[n, ci, oy*sh - ph + ky, ox*sw - pw + kx]
// GEMM view: M = Cout, N = Cin*KH*KW filter taps, K = batch*OH*OW (the long reduction).
// Register blocking as in conv2d_fwd.wgsl: BM output channels x 4 taps per invocation.
// Split K: the batch*OH output rows (n, oy) are cut into `splits` ranges of `rowsPerSplit`.
// `main` sums one range per invocation in a fixed order (n, oy, ox) and writes it to slice
// `split` of `dw` (bound to a scratch [splits, Cout*taps] buffer when splits > 1); `reduce`
// then adds the slices in split order. No atomics: results are bitwise reproducible.
// Why split: llvmpipe stops any shader invocation's loops after 65535 iterations in total
// (LP_MAX_TGSI_LOOP_ITERATIONS in Mesa), silently leaving a partial sum, and real GPUs need
// more invocations in flight than Cout/BM * taps/4. The host keeps each range well under it.
// beta = 1 adds into dw (summing micro-batches into one gradient buffer); beta = 0 never reads it.

override WG: u32 = 64;
override BM: u32 = 8;      // output channels per invocation, 1..MAX_BM
const MAX_BM: u32 = 32u;   // loops over acc run to MAX_BM and test i < BM: see conv2d_fwd.wgsl

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, oh: u32, ow: u32,
  kh: u32, kw: u32, sh: u32, sw: u32, ph: u32, pw: u32,
  mBlocks: u32, nBlocks: u32,
  splits: u32, rowsPerSplit: u32,
  beta: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;   // the GEMM's A operand first, as in conv2d.wgsl
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dw: array<f32>;
@group(0) @binding(4) var<storage, read> partial: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let gid = (wid.x + wid.y * nwg.x) * WG + lid;
  let blocks = p.mBlocks * p.nBlocks;
  if (gid >= blocks * p.splits) { return; }
  let split = gid / blocks;
  let nb = gid % p.nBlocks;
  let co0 = ((gid % blocks) / p.nBlocks) * BM;

  let kk = p.kh * p.kw;
  let taps = p.cin * kk;
  let HW = p.h * p.w;
  let OP = p.oh * p.ow;
  var valid: vec4<bool>;
  var ky: vec4i;
  var kx: vec4i;
  var xcol: vec4i;     // offset of the tap's channel plane inside one image
  for (var j = 0u; j < 4u; j++) {
    let t = nb * 4u + j;
    valid[j] = t < taps;
    let tt = min(t, taps - 1u);
    ky[j] = i32((tt % kk) / p.kw);
    kx[j] = i32(tt % p.kw);
    xcol[j] = i32((tt / kk) * HW);
  }

  var acc: array<vec4f, MAX_BM>;
  let dlast = p.n * p.cout * OP - 1u;   // clamp for channel rows past Cout (never stored)
  let H = i32(p.h);
  let W = i32(p.w);
  let r0 = split * p.rowsPerSplit;
  let r1 = min(r0 + p.rowsPerSplit, p.n * p.oh);
  for (var r = r0; r < r1; r++) {
    let b = r / p.oh;
    let oy = r % p.oh;
    let iy = vec4i(i32(oy * p.sh) - i32(p.ph)) + ky;
    let rowOk = valid & (iy >= vec4i(0)) & (iy < vec4i(H));
    let rowBase = vec4i(i32(b * p.cin * HW)) + xcol + iy * W;
    let d0 = (b * p.cout + co0) * OP + oy * p.ow;
    for (var ox = 0u; ox < p.ow; ox++) {
      let ix = vec4i(i32(ox * p.sw) - i32(p.pw)) + kx;
      let ok = rowOk & (ix >= vec4i(0)) & (ix < vec4i(W));
      let xo = vec4u(select(vec4i(0), rowBase + ix, ok));
      let xv = select(vec4f(0.0), vec4f(x[xo.x], x[xo.y], x[xo.z], x[xo.w]), ok);
      let d = d0 + ox;
      for (var i = 0u; i < MAX_BM; i++) {
        if (i < BM) { acc[i] = fma(vec4f(dy[min(d + i * OP, dlast)]), xv, acc[i]); }
      }
    }
  }

  let base = split * p.cout * taps;
  for (var i = 0u; i < MAX_BM; i++) {
    let co = co0 + i;
    for (var j = 0u; j < 4u; j++) {
      if (co < p.cout && i < BM && valid[j]) {
        let k = base + co * taps + nb * 4u + j;
        var v = acc[i][j];
        if (p.beta != 0.0) { v += p.beta * dw[k]; }
        dw[k] = v;
      }
    }
  }
}

// dw[k] = sum over s of partial[s * size + k] (s in order) + beta * dw[k], size = Cout*Cin*KH*KW.
@compute @workgroup_size(WG)
fn reduce(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let k = (wid.x + wid.y * nwg.x) * WG + lid;
  let size = p.cout * p.cin * p.kh * p.kw;
  if (k >= size) { return; }
  var v = 0.0;
  for (var s = 0u; s < p.splits; s++) { v += partial[s * size + k]; }
  if (p.beta != 0.0) { v += p.beta * dw[k]; }
  dw[k] = v;
}
