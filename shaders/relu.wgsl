// ReLU forward and backward, elementwise over a flat array.
// forward:  y = max(x, 0)
// backward: dx = dy * (x > 0)      (uses the forward INPUT x, as llm.c does)
// Binding convention (all kernels): @binding(0) is the uniform struct, storage from 1.
// Workgroups may be folded into 2D for large arrays: flat id = wid.x + wid.y * nwg.x.

override WG: u32 = 256;

struct Params { n: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n) { return; }
  out[i] = max(x[i], 0.0);
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n) { return; }
  out[i] = select(0.0, dy[i], x[i] > 0.0);
}
