// Batch normalisation over dim 1 of NCHW [N, C, H, W] (or [N, F], then H*W = 1).
// Training forward, per channel c over the M = N*H*W values (the whole batch):
//   sumX:      mean = sum(x) / M                                   (one workgroup per channel)
//   sumSqDev:  var = sum((x - mean)^2) / M  (two-pass: no cancellation of E[x^2] - mean^2)
//              invstd = 1 / sqrt(var + eps); running_mean = (1 - m) * running_mean + m * mean,
//              running_var = (1 - m) * running_var + m * var * M / (M - 1)   (unbiased; M = 1: 0)
//   normalize: y = (x - mean) * invstd * gamma + beta                  (one invocation per element)
// Inference: normalize with mode 1, where the mean/invstd bindings hold the running mean and
// running VARIANCE (invstd = 1 / sqrt(running_var + eps) computed here).
// Backward (xhat = (x - mean) * invstd, sdy = sum(dy), sdyx = sum(dy * (x - mean))):
//   bwdSums:   sums[c] = sdy, sums[C + c] = sdyx                          (one workgroup per channel)
//   bwdParams: dbeta = sdy, dgamma = sdyx * invstd           (= or += by p.acc; one thread per channel)
//   bwdInput:  dx = gamma * invstd * (dy - sdy / M - xhat * sdyx * invstd / M)
// A batch larger than one storage binding arrives in slices of samples: the reductions add
// slice by slice into their output (p.first = 1 on the first, which overwrites) and finish on
// the last (p.last = 1). Fixed order throughout, no atomics: the same bits on every run.
// Reading and writing bindings are separate variables, so no entry point binds one buffer
// both ways (running stats may share a buffer with gamma and beta).
// WG must be a power of two. Flat workgroup id = wid.x + wid.y * nwg.x (folded dispatches).

override WG: u32 = 256;

struct Params {
  n: u32,       // samples in this slice
  c: u32,
  hw: u32,
  off: u32,     // element offset of the slice's first sample in the x, dy and out bindings
  first: u32,   // reductions: 1 = first slice (overwrite), 0 = add
  last: u32,    // reductions: 1 = last slice (finish)
  mode: u32,    // normalize: 0 = saved mean/invstd, 1 = running mean/var
  acc: u32,     // bwdParams: 1 = dgamma/dbeta +=
  count: f32,   // M = N*H*W over the whole batch
  eps: f32,
  momentum: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read> gamma: array<f32>;
@group(0) @binding(4) var<storage, read> beta: array<f32>;
@group(0) @binding(5) var<storage, read> meanR: array<f32>;   // saved mean (or running mean)
@group(0) @binding(6) var<storage, read> invstdR: array<f32>; // saved invstd (or running var)
@group(0) @binding(7) var<storage, read_write> meanW: array<f32>;
@group(0) @binding(8) var<storage, read_write> invstdW: array<f32>;
@group(0) @binding(9) var<storage, read_write> runMean: array<f32>;
@group(0) @binding(10) var<storage, read_write> runVar: array<f32>;
@group(0) @binding(11) var<storage, read_write> out: array<f32>; // y or dx
@group(0) @binding(12) var<storage, read_write> sums: array<f32>; // [2C] backward scratch
@group(0) @binding(13) var<storage, read_write> dgamma: array<f32>;
@group(0) @binding(14) var<storage, read_write> dbeta: array<f32>;

var<workgroup> red: array<vec2f, WG>;

fn flatId(wid: vec3u, nwg: vec3u) -> u32 {
  return wid.x + wid.y * nwg.x;
}

// Index in x / dy of the k-th value of channel ch in this slice (k < n * hw).
fn at(ch: u32, k: u32) -> u32 {
  let s = k / p.hw;
  return p.off + (s * p.c + ch) * p.hw + (k - s * p.hw);
}

fn treeSum(lid: u32, v: vec2f) -> vec2f {
  red[lid] = v;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(WG)
fn sumX(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let ch = flatId(wid, nwg);
  if (ch >= p.c) { return; } // uniform: the whole workgroup leaves together
  var s = 0.0;
  for (var k = lid; k < p.n * p.hw; k += WG) { s += x[at(ch, k)]; }
  let r = treeSum(lid, vec2f(s, 0.0)).x;
  if (lid == 0u) {
    let t = select(meanW[ch], 0.0, p.first == 1u) + r;
    meanW[ch] = select(t, t / p.count, p.last == 1u);
  }
}

@compute @workgroup_size(WG)
fn sumSqDev(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let ch = flatId(wid, nwg);
  if (ch >= p.c) { return; } // uniform
  let m = meanR[ch];
  var s = 0.0;
  for (var k = lid; k < p.n * p.hw; k += WG) {
    let d = x[at(ch, k)] - m;
    s += d * d;
  }
  let r = treeSum(lid, vec2f(s, 0.0)).x;
  if (lid == 0u) {
    let t = select(invstdW[ch], 0.0, p.first == 1u) + r;
    if (p.last == 0u) {
      invstdW[ch] = t; // partial sum of squared deviations
      return;
    }
    invstdW[ch] = 1.0 / sqrt(t / p.count + p.eps);
    let unbiased = t / max(p.count - 1.0, 1.0);
    runMean[ch] = (1.0 - p.momentum) * runMean[ch] + p.momentum * m;
    runVar[ch] = (1.0 - p.momentum) * runVar[ch] + p.momentum * unbiased;
  }
}

@compute @workgroup_size(WG)
fn normalize(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatId(wid, nwg) * WG + lid;
  if (i >= p.n * p.c * p.hw) { return; }
  let ch = (i / p.hw) % p.c;
  let is = select(invstdR[ch], 1.0 / sqrt(invstdR[ch] + p.eps), p.mode == 1u);
  out[p.off + i] = (x[p.off + i] - meanR[ch]) * is * gamma[ch] + beta[ch];
}

@compute @workgroup_size(WG)
fn bwdSums(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let ch = flatId(wid, nwg);
  if (ch >= p.c) { return; } // uniform
  let m = meanR[ch];
  var s = vec2f(0.0);
  for (var k = lid; k < p.n * p.hw; k += WG) {
    let j = at(ch, k);
    s += vec2f(dy[j], dy[j] * (x[j] - m));
  }
  let r = treeSum(lid, s);
  if (lid == 0u) {
    let keep = p.first == 0u;
    sums[ch] = select(0.0, sums[ch], keep) + r.x;
    sums[p.c + ch] = select(0.0, sums[p.c + ch], keep) + r.y;
  }
}

@compute @workgroup_size(WG)
fn bwdParams(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let ch = flatId(wid, nwg) * WG + lid;
  if (ch >= p.c) { return; }
  let acc = p.acc == 1u;
  dbeta[ch] = select(0.0, dbeta[ch], acc) + sums[ch];
  dgamma[ch] = select(0.0, dgamma[ch], acc) + sums[p.c + ch] * invstdR[ch];
}

@compute @workgroup_size(WG)
fn bwdInput(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatId(wid, nwg) * WG + lid;
  if (i >= p.n * p.c * p.hw) { return; }
  let ch = (i / p.hw) % p.c;
  let is = invstdR[ch];
  let xhat = (x[p.off + i] - meanR[ch]) * is;
  let gx = sums[p.c + ch] * is; // dgamma of this batch
  out[p.off + i] = gamma[ch] * is * (dy[p.off + i] - sums[ch] / p.count - xhat * gx / p.count);
}
