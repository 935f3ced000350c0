// conv2d backward to the input ("transposed convolution" of dy with w), NCHW, as a gather:
//   dx[n, ci, y, x] = sum over taps (ky, kx) with (y + ph - ky) = oy*sh, (x + pw - kx) = ox*sw,
//                     0 <= oy < OH, 0 <= ox < OW, of  sum_co dy[n, co, oy, ox] * w[co, ci, ky, kx]
// With stride > 1 only every sh-th tap row touches a given y: the taps are ky = ry, ry + sh, ...
// where ry = (y + ph) mod sh. So the host dispatches one PHASE (ry, rx) at a time: the input
// positions y = iy0 + sh*a, x = ix0 + sw*b that share it, whose taps are ky = ry + sh*ty and
// whose dy row is oy = ch + a - ty (ch = (iy0 + ph - ry) / sh; likewise for x). Every multiply
// is a real one; positions with no taps (1x1 stride 2) get zero. No atomics, fixed order.
// GEMM view per phase: M = Cin, N = batch*hp*wp positions, K = Cout * taps.
// Register blocking as in conv2d_fwd.wgsl: BM input channels x 4 positions per invocation.
// beta = 1 adds into dx (gradient accumulation); beta = 0 never reads dx.

override WG: u32 = 64;
override BM: u32 = 8;      // input channels per invocation, 1..MAX_BM
const MAX_BM: u32 = 32u;   // loops over acc run to MAX_BM and test i < BM: see conv2d_fwd.wgsl

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, oh: u32, ow: u32,
  kh: u32, kw: u32, sh: u32, sw: u32, ph: u32, pw: u32,
  mBlocks: u32, nBlocks: u32,
  splits: u32, rowsPerSplit: u32,         // unused here: the layout is shared by all conv kernels
  beta: f32,
  // The phase: first input row/col, rows/cols in it, first tap, tap counts, dy offsets.
  iy0: u32, ix0: u32, hp: u32, wp: u32,
  ry: u32, rx: u32, th: u32, tw: u32, ch: u32, cw: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> wt: array<f32>;   // the GEMM's A operand first, as in conv2d.wgsl
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let gid = (wid.x + wid.y * nwg.x) * WG + lid;
  if (gid >= p.mBlocks * p.nBlocks) { return; }
  let nb = gid % p.nBlocks;
  let ci0 = (gid / p.nBlocks) * BM;

  let PP = p.hp * p.wp;
  let total = p.n * PP;
  let OP = p.oh * p.ow;
  let HW = p.h * p.w;
  var valid: vec4<bool>;
  var oy0: vec4i;      // dy row for tap ty = 0
  var ox0: vec4i;
  var dybase: vec4i;
  var xo: vec4u;       // dx index of the lane's position, channel 0
  for (var j = 0u; j < 4u; j++) {
    let q = nb * 4u + j;
    valid[j] = q < total;
    let qq = min(q, total - 1u);
    let b = qq / PP;
    let a = (qq % PP) / p.wp;
    let c = qq % p.wp;
    oy0[j] = i32(p.ch + a);
    ox0[j] = i32(p.cw + c);
    dybase[j] = i32(b * p.cout * OP);
    xo[j] = b * p.cin * HW + (p.iy0 + a * p.sh) * p.w + p.ix0 + c * p.sw;
  }

  var acc: array<vec4f, MAX_BM>;
  let kk = p.kh * p.kw;
  let wstride = p.cin * kk;              // elements between output channels in w
  let wlast = p.cout * wstride - 1u;     // clamp for channel rows past Cin (never stored)
  let OH = i32(p.oh);
  let OW = i32(p.ow);
  for (var ty = 0u; ty < p.th; ty++) {
    let oy = oy0 - vec4i(i32(ty));
    let rowOk = valid & (oy >= vec4i(0)) & (oy < vec4i(OH));
    let ky = p.ry + ty * p.sh;
    for (var tx = 0u; tx < p.tw; tx++) {
      let ox = ox0 - vec4i(i32(tx));
      let ok = rowOk & (ox >= vec4i(0)) & (ox < vec4i(OW));
      let yo = vec4u(select(dybase, dybase + oy * OW + ox, ok));
      var wo = ci0 * kk + ky * p.kw + p.rx + tx * p.sw;
      for (var co = 0u; co < p.cout; co++) {
        let c = co * OP;
        let g = select(vec4f(0.0), vec4f(dy[yo.x + c], dy[yo.y + c], dy[yo.z + c], dy[yo.w + c]), ok);
        for (var i = 0u; i < MAX_BM; i++) {
          if (i < BM) { acc[i] = fma(vec4f(wt[min(wo + i * kk, wlast)]), g, acc[i]); }
        }
        wo += wstride;
      }
    }
  }

  for (var i = 0u; i < MAX_BM; i++) {
    let ci = ci0 + i;
    for (var j = 0u; j < 4u; j++) {
      if (ci < p.cin && i < BM && valid[j]) {
        let k = xo[j] + ci * HW;
        var v = acc[i][j];
        if (p.beta != 0.0) { v += p.beta * dx[k]; }
        dx[k] = v;
      }
    }
  }
}
