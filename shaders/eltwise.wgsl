// Elementwise ops over flat arrays (the caller splits arrays larger than one binding).
//   add:          out = x + y          (residual join)
//   addInPlace:   out += y             (accumulate; out is bound read_write, no aliasing)
//   scale:        out = a * x
//   scaleInPlace: out *= a
//   axpy:         out += a * x
//   fill:         out = a
// Flat id = wid.x + wid.y * nwg.x for folded dispatches; every entry bounds-checks.

override WG: u32 = 256;

struct Params { n: u32, a: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn flatIndex(wid: vec3u, nwg: vec3u, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(WG)
fn add(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i < p.n) { out[i] = x[i] + y[i]; }
}

@compute @workgroup_size(WG)
fn addInPlace(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i < p.n) { out[i] = out[i] + y[i]; }
}

@compute @workgroup_size(WG)
fn scale(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i < p.n) { out[i] = p.a * x[i]; }
}

@compute @workgroup_size(WG)
fn scaleInPlace(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i < p.n) { out[i] = p.a * out[i]; }
}

@compute @workgroup_size(WG)
fn axpy(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i < p.n) { out[i] = out[i] + p.a * x[i]; }
}

@compute @workgroup_size(WG)
fn fill(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatIndex(wid, nwg, lid);
  if (i < p.n) { out[i] = p.a; }
}
