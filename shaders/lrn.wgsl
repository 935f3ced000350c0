// Local response normalisation across channels (PyTorch's LocalResponseNorm), NCHW:
//   s_c = k + alpha / size * sum_{c' = c - size/2 .. c + (size-1)/2, inside [0, C)} x_{c'}^2
//   forward:  y_c = x_c * s_c^(-beta)
//   backward: dx_j = dy_j * s_j^(-beta)
//                    - (2 * alpha * beta / size) * x_j * sum_{c : j in window(c)} dy_c * x_c * s_c^(-beta-1)
//             where j is in window(c) for c = j - (size-1)/2 .. j + size/2 (the mirrored window).
// One invocation per element. Backward takes forward's output y (as cuDNN's does), since
// x_c * s_c^(-beta-1) = y_c / s_c saves a pow per window channel (pow is exp2 and log2, slow on
// CPU drivers); it recomputes each s_c it needs (size^2 reads) rather than keeping a scale
// tensor from forward: no extra memory, and sizes are small (AlexNet: 5).
// Samples of a batch slice start at element p.off of each binding. Flat id: wid.x + wid.y * nwg.x.

override WG: u32 = 256;

struct Params {
  n: u32,      // samples in this slice
  c: u32,
  hw: u32,
  off: u32,
  size: u32,
  alpha: f32,
  beta: f32,
  k: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // y (forward) or dx
@group(0) @binding(4) var<storage, read> y: array<f32>;         // backward: forward's output

struct Pos { base: u32, c: u32 } // base: index of channel 0 at this sample and pixel

fn posOf(i: u32) -> Pos {
  let per = p.c * p.hw;
  let s = i / per;
  let r = i - s * per;
  let c = r / p.hw;
  return Pos(p.off + s * per + (r - c * p.hw), c);
}

// Channels [first, last] inclusive of the window that starts `before` channels before c.
fn chans(c: u32, before: u32, after: u32) -> vec2u {
  return vec2u(select(0u, c - before, c >= before), min(c + after, p.c - 1u));
}

fn scale(base: u32, c: u32) -> f32 {
  let w = chans(c, p.size / 2u, (p.size - 1u) / 2u);
  var s = 0.0;
  for (var j = w.x; j <= w.y; j++) {
    let v = x[base + j * p.hw];
    s += v * v;
  }
  return p.k + p.alpha / f32(p.size) * s;
}

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n * p.c * p.hw) { return; }
  let q = posOf(i);
  let j = q.base + q.c * p.hw;
  out[j] = x[j] * pow(scale(q.base, q.c), -p.beta);
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n * p.c * p.hw) { return; }
  let q = posOf(i);
  let w = chans(q.c, (p.size - 1u) / 2u, p.size / 2u);
  var t = 0.0;
  for (var c = w.x; c <= w.y; c++) {
    let idx = q.base + c * p.hw;
    t += dy[idx] * y[idx] / scale(q.base, c); // x_c * s_c^(-beta-1) = y_c / s_c: no pow
  }
  let j = q.base + q.c * p.hw;
  out[j] = dy[j] * pow(scale(q.base, q.c), -p.beta) - 2.0 * p.alpha * p.beta / f32(p.size) * x[j] * t;
}
