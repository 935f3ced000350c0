// Deterministic sums and sums of squares in f32, two passes (no atomics):
//   pass 1: each workgroup reduces one chunk of CH = WG * ITEMS consecutive elements
//           (each thread ITEMS strided terms in order, then a tree) into partials[w];
//   pass 2: one workgroup per result sums its partials (strided, then a tree).
// The summation tree has depth about ITEMS + log2(WG) + ceil(chunks / WG) + log2(WG), so the
// rounding error grows with that depth, not with the length as a running sum's would.
//
// Segmented mode (LARS: per-tensor norms inside one flat buffer), tables from segmentTable:
//   segPartials: one dispatch per binding window (x is a view of the window); workgroup w
//                computes partial pbase + w, finding its piece by binary search in the
//                window's pieces; a piece never straddles a chunk, so chunks of a segment
//                split over windows are the same as unsplit
//   segFinish:   out[s] = sum of segment s's partials (consecutive); 0 for an empty segment;
//                NaN for a segment outside x
// Whole-tensor mode: wholePartials per binding range (partials from pbase), wholeFinish.
// WG must be a power of two.

override WG: u32 = 256;
override ITEMS: u32 = 16;
override CH: u32 = WG * ITEMS;

struct Params {
  n: u32,     // elements in x (this binding)
  s: u32,     // pieces in this window (segPartials) / segments (segFinish) / partials (wholeFinish)
  cap: u32,   // segPartials: partials of this window = workgroups with work
  sq: u32,    // 1: sum of squares, 0: plain sum
  pbase: u32, // index of this dispatch's first partial
  first: u32, // segPartials: index of this window's first piece
}

@group(0) @binding(0) var<uniform> p: Params;
// segPartials: pieces (offset in x, length, first partial, 0);
// segFinish: segments (first partial, partial count, 1 if inside x, 0).
@group(0) @binding(1) var<storage, read> table: array<vec4u>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

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

@compute @workgroup_size(WG)
fn segPartials(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x;
  if (w >= p.cap) { return; } // uniform: the whole workgroup leaves together
  let gp = p.pbase + w;
  // Largest piece k of this window with table[k].z <= gp (pieces are never empty).
  var lo = p.first;
  var hi = p.first + p.s - 1u;
  while (lo < hi) {
    let mid = (lo + hi + 1u) / 2u;
    if (table[mid].z <= gp) { lo = mid; } else { hi = mid - 1u; }
  }
  let piece = table[lo];
  let done = (gp - piece.z) * CH;
  let r = chunkSum(lid, piece.x + done, piece.x + min(piece.y, done + CH));
  if (lid == 0u) { partials[gp] = r; }
}

@compute @workgroup_size(WG)
fn segFinish(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x + wid.y * nwg.x;
  if (s >= p.s) { return; } // uniform
  let seg = table[s];
  let r = partialSum(lid, seg.x, seg.y);
  if (lid == 0u) { out[s] = select(bitcast<f32>(NAN_BITS), r, seg.z == 1u); }
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
