// Bias add over dim 1 of NCHW [N, C, H, W], or of [N, F] (then H*W = 1).
// forward:        y[n,c,s] = x[n,c,s] + b[c]
// forwardInPlace: y[n,c,s] += b[c]        (one read_write binding: WebGPU forbids aliasing)
// backward:       db[c] = sum over n, s of dy[n,c,s]   (db[c] += ... when acc == 1)
// backward runs one workgroup per channel: each thread sums a fixed strided subset in order,
// then a tree in workgroup memory, so the result is the same bits on every run (no atomics).
// WG must be a power of two. Flat workgroup id = wid.x + wid.y * nwg.x (folded dispatches).

override WG: u32 = 256;

struct Params {
  n: u32,     // forward: elements in this range; backward: samples in this batch slice
  c: u32,
  hw: u32,
  start: u32, // forward: flat index of inp[0] in the whole tensor; backward: offset of sample 0 in inp
  acc: u32,   // backward: 1 = accumulate into db
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> inp: array<f32>;       // x (forward) or dy (backward)
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // y, x in place, or db

var<workgroup> part: array<f32, WG>;

fn flatIndex(wid: vec3u, nwg: vec3u, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

fn channelOf(i: u32) -> u32 {
  return ((p.start + i) / p.hw) % p.c;
}

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i >= p.n) { return; }
  out[i] = inp[i] + b[channelOf(i)];
}

@compute @workgroup_size(WG)
fn forwardInPlace(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i >= p.n) { return; }
  out[i] = out[i] + b[channelOf(i)];
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x + wid.y * nwg.x;
  if (c >= p.c) { return; } // uniform: the whole workgroup leaves together
  let count = p.n * p.hw;
  var s = 0.0;
  for (var k = lid; k < count; k += WG) {
    let n = k / p.hw;
    s += inp[p.start + (n * p.c + c) * p.hw + (k - n * p.hw)];
  }
  part[lid] = s;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h >>= 1u) {
    if (lid < h) { part[lid] += part[lid + h]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    if (p.acc == 1u) { out[c] += part[0]; } else { out[c] = part[0]; }
  }
}
