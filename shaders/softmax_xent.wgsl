// Softmax cross-entropy with integer labels, loss and gradient in one pass over the logits.
//   logits [N, K], labels [N] (i32)
//   forward:  losses[n]    = logsumexp(logits[n, :]) - (1 - eps) logits[n, label[n]]
//                            - (eps / K) sum_k logits[n, k]
//             dlogits[n,k] = (softmax(logits[n, :])[k] - (1 - eps) (k == label[n]) - eps / K) * scale
//             (eps: label smoothing; eps = 0 is plain cross-entropy, bit for bit)
//   total:    total[0]     = sum over n of losses[n] (one workgroup, fixed order)
// logsumexp is stabilised by the row max, so logits of 1e4 do not overflow exp().
// A label outside [0, K) is never used as an index: its loss is NaN (so the total is NaN and
// the step is visibly bad) and its dlogits row is 0 (so it cannot poison shared weights).
// One workgroup per row; per-thread strided loops in a fixed order, then trees in workgroup
// memory: bitwise reproducible. WG must be a power of two.

override WG: u32 = 256;

struct Params { n: u32, k: u32, scale: f32, eps: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(4) var<storage, read_write> losses: array<f32>;
@group(0) @binding(5) var<storage, read_write> total: array<f32>;

var<workgroup> red: array<f32, WG>;
// A quiet NaN, loaded at run time: a NaN constant expression is a shader-creation error.
var<private> NAN_BITS: u32 = 0x7fc00000u;

// Tree reduction of one value per thread; every thread gets the result.
fn treeReduce(lid: u32, v: f32, isMax: bool) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h >>= 1u) {
    if (lid < h) {
      let o = red[lid + h];
      red[lid] = select(red[lid] + o, max(red[lid], o), isMax);
    }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier(); // red is reused by the next reduction
  return r;
}

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.n) { return; } // uniform: the whole workgroup leaves together
  let base = row * p.k;
  // Start from a real logit (not -inf) so the max is always an element of the row.
  var m = logits[base];
  for (var k = lid; k < p.k; k += WG) { m = max(m, logits[base + k]); }
  m = treeReduce(lid, m, true);
  var s = 0.0;
  for (var k = lid; k < p.k; k += WG) { s += exp(logits[base + k] - m); }
  s = treeReduce(lid, s, false);
  // Sum of (x - m) over the row, for the smoothed target's uniform part.
  var c = 0.0;
  for (var k = lid; k < p.k; k += WG) { c += logits[base + k] - m; }
  c = treeReduce(lid, c, false);

  let label = labels[row];
  let valid = label >= 0 && u32(label) < p.k;
  let col = select(p.k, u32(label), valid); // p.k never matches a column
  let inv = 1.0 / s;
  for (var k = lid; k < p.k; k += WG) {
    let g = exp(logits[base + k] - m) * inv - select(0.0, 1.0 - p.eps, k == col) - p.eps / f32(p.k);
    dlogits[base + k] = select(0.0, g * p.scale, valid);
  }
  if (lid == 0u) {
    if (valid) {
      // log(s) - (x - m) rather than (m + log(s)) - x: no cancellation of two large numbers.
      // With eps = 0 the last term is exactly 0 (select: not 0 * c, which is NaN for c = inf).
      losses[row] = log(s) - (1.0 - p.eps) * (logits[base + col] - m) - select(0.0, p.eps * c / f32(p.k), p.eps > 0.0);
    } else {
      losses[row] = bitcast<f32>(NAN_BITS);
    }
  }
}

@compute @workgroup_size(WG)
fn sumLosses(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  for (var i = lid; i < p.n; i += WG) { s += losses[i]; }
  s = treeReduce(lid, s, false);
  if (lid == 0u) { total[0] = s; }
}
