// Optimiser updates over the flat parameter (w), gradient (g) and momentum (v) buffers.
// Each parameter tensor is a segment; each workgroup updates one chunk of CH = WG * ITEMS
// elements of one segment (threads stride by WG, so reads are coalesced). w, g and v are
// views of one binding window of the flat buffers (one dispatch per window when the model is
// larger than a storage binding). The row table, built once per layout on the CPU, holds per
// piece of a segment inside a window (offset in the window, length, flags, firstChunk,
// segment); a workgroup finds its row by binary search on firstChunk among the window's rows
// (the same result for the whole workgroup). Padding between segments is never touched.
//
// lars (You, Gitman, Ginsburg 2017), per segment s, with g = G * gradScale:
//   beta_s = decay_s ? beta : 0
//   ||w|| = sqrt(norms[s]),  ||g|| = sqrt(norms[gsqBase + s]) * gradScale
//   lambda = eta * ||w|| / (||g|| + beta_s * ||w||)  if adapt_s and ||w|| > 0 and ||g|| > 0
//          = 1                                        otherwise (the safe value)
//   v <- m * v + (lr * lambda) * (g + beta_s * w);   w <- w - v
// sgd: the same with lambda = 1; with nesterov, w <- w - (m * v_new + lr * (g + beta_s * w)).
// src/ref/optim.ts writes the same expressions in the same order. No atomics and a fixed
// order: the same inputs give the same bits on every run. Flat workgroup id
// wid.x + wid.y * nwg.x (dispatches are folded for large models).

override WG: u32 = 256;
override ITEMS: u32 = 4;
override CH: u32 = WG * ITEMS;

const ADAPT: u32 = 1u;
const DECAY: u32 = 2u;

struct Params {
  s: u32,         // rows of this window
  chunks: u32,    // chunks of this window (workgroups with work)
  gsqBase: u32,   // index of ||g||^2 of segment 0 in norms (||w||^2 starts at 0)
  nesterov: u32,  // sgd: 1 for Nesterov momentum
  lr: f32,        // scheduled global rate gamma_t
  momentum: f32,  // m
  beta: f32,      // weight decay
  eta: f32,       // LARS trust coefficient
  gradScale: f32, // g = G * gradScale
  first: u32,     // index of this window's first row
}

struct Row {
  offset: u32,     // in this window
  length: u32,
  flags: u32,      // ADAPT | DECAY
  firstChunk: u32, // of this window's chunks
  seg: u32,        // segment: index of its norms (a split segment has one row per window)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read_write> w: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read> norms: array<f32>; // lars only: ||w||^2 [S], ||g||^2 [S]

// Largest row r of this window with firstChunk <= c.
fn findRow(c: u32) -> Row {
  var lo = p.first;
  var hi = p.first + p.s - 1u;
  while (lo < hi) {
    let mid = (lo + hi + 1u) / 2u;
    if (rows[mid].firstChunk <= c) { lo = mid; } else { hi = mid - 1u; }
  }
  return rows[lo];
}

fn decayOf(row: Row) -> f32 {
  return select(0.0, p.beta, (row.flags & DECAY) != 0u);
}

// The shared update of chunk c of row: d = g + beta w; v <- m v + rate d;
// w <- w - v (Nesterov: w <- w - (m v + rate d)). lars passes rate = lr * lambda and
// nesterov = 0; sgd passes rate = lr.
fn update(c: u32, lid: u32, row: Row, rate: f32, beta: f32) {
  let done = (c - row.firstChunk) * CH;
  let start = row.offset + done;
  let end = row.offset + min(row.length, done + CH);
  for (var t = 0u; t < ITEMS; t++) {
    let i = start + t * WG + lid;
    if (i < end) {
      let wi = w[i];
      let d = g[i] * p.gradScale + beta * wi;
      let vi = p.momentum * v[i] + rate * d;
      v[i] = vi;
      w[i] = select(wi - vi, wi - (p.momentum * vi + rate * d), p.nesterov == 1u);
    }
  }
}

@compute @workgroup_size(WG)
fn lars(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x + wid.y * nwg.x;
  if (c >= p.chunks) { return; }
  let row = findRow(c);
  let beta = decayOf(row);
  let wn = sqrt(norms[row.seg]);
  let gn = sqrt(norms[p.gsqBase + row.seg]) * p.gradScale;
  var lambda = 1.0;
  if ((row.flags & ADAPT) != 0u && wn > 0.0 && gn > 0.0) { lambda = p.eta * wn / (gn + beta * wn); }
  update(c, lid, row, p.lr * lambda, beta);
}

@compute @workgroup_size(WG)
fn sgd(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x + wid.y * nwg.x;
  if (c >= p.chunks) { return; }
  let row = findRow(c);
  update(c, lid, row, p.lr, decayOf(row));
}
