// Deterministic sums and sums of squares in f32, two passes (no atomics):
//   pass 1: each workgroup reduces one chunk of CH = WG * ITEMS consecutive elements
//           (each thread ITEMS strided terms in order, then a tree) into partials[w];
//   pass 2: one workgroup per result sums its partials (strided, then a tree).
// The summation tree has depth about ITEMS + log2(WG) + ceil(chunks / WG) + log2(WG), so the
// rounding error grows with that depth, not with the length as a running sum's would.
//
// Segmented mode (LARS: per-tensor norms inside one flat buffer):
//   segPrefix:   prefix[s] = total chunks of segments before s (one thread; S is small)
//   segPartials: workgroup w finds its segment by binary search in prefix
//   segFinish:   out[s] = sum of that segment's partials; 0 for an empty segment; NaN for
//                a segment outside x or beyond the partials capacity (overlapping segments)
// Whole-tensor mode: wholePartials per binding range (partials from pbase), wholeFinish.
// WG must be a power of two.

override WG: u32 = 256;
override ITEMS: u32 = 16;
override CH: u32 = WG * ITEMS;

struct Params {
  n: u32,     // elements in x
  s: u32,     // segments (segmented) / partials to sum (wholeFinish)
  cap: u32,   // partials capacity = workgroups dispatched for segPartials
  sq: u32,    // 1: sum of squares, 0: plain sum
  pbase: u32, // wholePartials: index of this range's first partial
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> segs: array<u32>;          // [offset, length] pairs
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> prefixOut: array<u32>; // segPrefix writes S + 1
@group(0) @binding(4) var<storage, read> prefix: array<u32>;          // the same buffer, read
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> red: array<f32, WG>;
var<private> NAN_BITS: u32 = 0x7fc00000u; // loaded at run time: a NaN constant is an error

fn treeSum(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  return red[0];
}

// Sum (of squares) of x[start, end), end - start <= CH, by this workgroup.
fn chunkSum(lid: u32, start: u32, end: u32) -> f32 {
  var s = 0.0;
  for (var t = 0u; t < ITEMS; t++) {
    let i = start + t * WG + lid;
    if (i < end) {
      let v = x[i];
      s += select(v, v * v, p.sq == 1u);
    }
  }
  return treeSum(lid, s);
}

// Sum of partials[start, start + count) by this workgroup.
fn partialSum(lid: u32, start: u32, count: u32) -> f32 {
  var s = 0.0;
  for (var k = lid; k < count; k += WG) { s += partials[start + k]; }
  return treeSum(lid, s);
}

fn segmentInRange(s: u32) -> bool {
  let off = segs[2u * s];
  let len = segs[2u * s + 1u];
  return len <= p.n && off <= p.n - len; // written so it cannot overflow
}

@compute @workgroup_size(1)
fn segPrefix() {
  var acc = 0u;
  for (var s = 0u; s < p.s; s++) {
    prefixOut[s] = acc;
    if (segmentInRange(s)) { acc += (segs[2u * s + 1u] + CH - 1u) / CH; }
  }
  prefixOut[p.s] = acc;
}

@compute @workgroup_size(WG)
fn segPartials(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x;
  if (w >= p.cap) { return; } // uniform: the whole workgroup leaves together
  // Largest s with prefix[s] <= w; w is a chunk of segment s when w < prefix[s + 1].
  var lo = 0u;
  var hi = p.s;
  while (lo < hi) {
    let mid = (lo + hi + 1u) / 2u;
    if (prefix[mid] <= w) { lo = mid; } else { hi = mid - 1u; }
  }
  var start = 0u;
  var end = 0u; // an empty range when w is past the last chunk
  if (lo < p.s) {
    let off = segs[2u * lo];
    let len = segs[2u * lo + 1u];
    let done = (w - prefix[lo]) * CH;
    start = off + done;
    end = off + min(len, done + CH);
  }
  let r = chunkSum(lid, start, end);
  if (lid == 0u) { partials[w] = r; }
}

@compute @workgroup_size(WG)
fn segFinish(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x + wid.y * nwg.x;
  if (s >= p.s) { return; } // uniform
  let first = min(prefix[s], p.cap);
  let last = min(prefix[s + 1u], p.cap);
  let r = partialSum(lid, first, last - first);
  if (lid == 0u) {
    let ok = segmentInRange(s) && prefix[s + 1u] <= p.cap;
    out[s] = select(bitcast<f32>(NAN_BITS), r, ok);
  }
}

@compute @workgroup_size(WG)
fn wholePartials(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x;
  if (w * CH >= p.n) { return; } // uniform
  let r = chunkSum(lid, w * CH, min(p.n, (w + 1u) * CH));
  if (lid == 0u) { partials[p.pbase + w] = r; }
}

@compute @workgroup_size(WG)
fn wholeFinish(@builtin(local_invocation_index) lid: u32) {
  let r = partialSum(lid, 0u, p.s);
  if (lid == 0u) { out[0] = r; }
}
