// 2-D pooling over NCHW planes (N*C planes of H x W -> OH x OW), forward and backward.
// maxForward:  y = max over the in-image part of the window, argmax = its index iy*W + ix in
//              the plane; ties go to the FIRST max in scan order (rows, then columns): a later
//              element replaces the best only if strictly greater. Padding never wins.
// avgForward:  y = sum over the in-image part / its element count (count_include_pad = false).
// maxBackward, avgBackward: a GATHER, one invocation per dx element: it visits the windows
//              that contain it (overlapping windows: several), in (oy, ox) order, and sums
//              dy (max: only where that window's argmax is this element; avg: dy / count).
//              No atomics, fixed order: the same bits on every run.
// x-side tensors (x, dx) start at element p.xoff of their binding and y-side ones (y, dy,
// argmax) at p.yoff: batch slices bind views that start at an aligned element just before.
// Flat id of folded dispatches: wid.x + wid.y * nwg.x, times WG, plus the local index.

override WG: u32 = 256;

struct Params {
  planes: u32, // N * C in this batch slice
  h: u32, w: u32, oh: u32, ow: u32,
  kh: u32, kw: u32, sh: u32, sw: u32, ph: u32, pw: u32,
  xoff: u32, yoff: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // y (forward) or dx (backward)
@group(0) @binding(3) var<storage, read_write> argOut: array<u32>; // maxForward writes argmax
@group(0) @binding(4) var<storage, read> argIn: array<u32>;        // maxBackward reads it
@group(0) @binding(5) var<storage, read> dy: array<f32>;

fn flatId(wid: vec3u, nwg: vec3u, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

// In-image part [start, end) of the window of output o along one axis (input size n).
fn span(o: u32, s: u32, pad: u32, k: u32, n: u32) -> vec2u {
  let lo = i32(o * s) - i32(pad);
  return vec2u(u32(max(lo, 0)), u32(min(lo + i32(k), i32(n))));
}

// Outputs [first, last] along one axis whose window contains input i (empty when first > last).
fn coverers(i: u32, s: u32, pad: u32, k: u32, on: u32) -> vec2i {
  let lo = i32(i + pad) - i32(k) + 1; // the window of o starts at o*s - pad <= i <= o*s - pad + k - 1
  let first = select(0, (lo + i32(s) - 1) / i32(s), lo > 0);
  let last = min(i32((i + pad) / s), i32(on) - 1);
  return vec2i(first, last);
}

// Output i's window: its in-image rows ys and columns xs, and where its plane starts in x.
struct Window { base: u32, ys: vec2u, xs: vec2u }

fn windowOf(i: u32) -> Window {
  let plane = i / (p.oh * p.ow);
  let r = i - plane * p.oh * p.ow;
  let oy = r / p.ow;
  let ox = r - oy * p.ow;
  return Window(p.xoff + plane * p.h * p.w, span(oy, p.sh, p.ph, p.kh, p.h), span(ox, p.sw, p.pw, p.kw, p.w));
}

fn count(ys: vec2u, xs: vec2u) -> f32 {
  return f32((ys.y - ys.x) * (xs.y - xs.x));
}

@compute @workgroup_size(WG)
fn maxForward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatId(wid, nwg, lid);
  if (i >= p.planes * p.oh * p.ow) { return; }
  let win = windowOf(i);
  let base = win.base;
  var bi = win.ys.x * p.w + win.xs.x; // pad < kernel, so every window has an in-image element
  var best = x[base + bi];
  for (var iy = win.ys.x; iy < win.ys.y; iy++) {
    for (var ix = win.xs.x; ix < win.xs.y; ix++) {
      let v = x[base + iy * p.w + ix];
      if (v > best) { best = v; bi = iy * p.w + ix; }
    }
  }
  out[p.yoff + i] = best;
  argOut[p.yoff + i] = bi;
}

@compute @workgroup_size(WG)
fn avgForward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatId(wid, nwg, lid);
  if (i >= p.planes * p.oh * p.ow) { return; }
  let win = windowOf(i);
  let base = win.base;
  var s = 0.0;
  for (var iy = win.ys.x; iy < win.ys.y; iy++) {
    for (var ix = win.xs.x; ix < win.xs.y; ix++) { s += x[base + iy * p.w + ix]; }
  }
  out[p.yoff + i] = s / count(win.ys, win.xs);
}

// Input i's position in its plane, the outputs [first, last] per axis whose windows hold it,
// and where its plane starts in the y-side tensors.
struct Cover { base: u32, iy: u32, ix: u32, oys: vec2i, oxs: vec2i }

fn coverOf(i: u32) -> Cover {
  let plane = i / (p.h * p.w);
  let r = i - plane * p.h * p.w;
  let iy = r / p.w;
  let ix = r - iy * p.w;
  return Cover(p.yoff + plane * p.oh * p.ow, iy, ix, coverers(iy, p.sh, p.ph, p.kh, p.oh), coverers(ix, p.sw, p.pw, p.kw, p.ow));
}

@compute @workgroup_size(WG)
fn maxBackward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatId(wid, nwg, lid);
  if (i >= p.planes * p.h * p.w) { return; }
  let c = coverOf(i);
  let me = c.iy * p.w + c.ix;
  let base = c.base;
  var s = 0.0;
  for (var oy = c.oys.x; oy <= c.oys.y; oy++) {
    for (var ox = c.oxs.x; ox <= c.oxs.y; ox++) {
      let o = base + u32(oy) * p.ow + u32(ox);
      if (argIn[o] == me) { s += dy[o]; }
    }
  }
  out[p.xoff + i] = s;
}

@compute @workgroup_size(WG)
fn avgBackward(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = flatId(wid, nwg, lid);
  if (i >= p.planes * p.h * p.w) { return; }
  let c = coverOf(i);
  let base = c.base;
  var s = 0.0;
  for (var oy = c.oys.x; oy <= c.oys.y; oy++) {
    let ys = span(u32(oy), p.sh, p.ph, p.kh, p.h);
    for (var ox = c.oxs.x; ox <= c.oxs.y; ox++) {
      let xs = span(u32(ox), p.sw, p.pw, p.kw, p.w);
      s += dy[base + u32(oy) * p.ow + u32(ox)] / count(ys, xs);
    }
  }
  out[p.xoff + i] = s;
}
