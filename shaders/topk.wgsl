// Top-1 / top-k accuracy counting for logits [N, K] and labels [N] (i32).
//   rank:  ranks[n] = number of classes whose logit is STRICTLY larger than the label's.
//          Ties therefore count in the label's favour: the label is in the top k when fewer
//          than k classes beat it. A label outside [0, K), or a NaN label logit, gets rank K
//          (never counted) and is never used as an index.
//   count: counts[0] (+)= #(rank < 1), counts[1] (+)= #(rank < topk)  (one workgroup)
// One workgroup per row with a fixed-order tree: exact integer counts, no atomics.

override WG: u32 = 64;

struct Params { n: u32, k: u32, topk: u32, acc: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read_write> ranks: array<u32>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;

var<workgroup> red: array<vec2u, WG>;

fn treeSum(lid: u32, v: vec2u) -> vec2u {
  red[lid] = v;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(WG)
fn rank(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.n) { return; } // uniform: the whole workgroup leaves together
  let base = row * p.k;
  let label = labels[row];
  let valid = label >= 0 && u32(label) < p.k;
  var v = 0.0;
  if (valid) { v = logits[base + u32(label)]; }
  var c = 0u;
  for (var k = lid; k < p.k; k += WG) { c += select(0u, 1u, logits[base + k] > v); }
  let total = treeSum(lid, vec2u(c, 0u)).x;
  // v != v is the NaN test: a NaN logit beats nothing, so it must not count as a hit.
  if (lid == 0u) { ranks[row] = select(total, p.k, !valid || v != v); }
}

@compute @workgroup_size(WG)
fn count(@builtin(local_invocation_index) lid: u32) {
  var c = vec2u(0u);
  for (var i = lid; i < p.n; i += WG) {
    let r = ranks[i];
    c += vec2u(select(0u, 1u, r < 1u), select(0u, 1u, r < p.topk));
  }
  let t = treeSum(lid, c);
  if (lid == 0u) {
    if (p.acc == 1u) { counts[0] += t.x; counts[1] += t.y; } else { counts[0] = t.x; counts[1] = t.y; }
  }
}
