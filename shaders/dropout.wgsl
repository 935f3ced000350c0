// Inverted dropout with a counter-based mask: element i of a tensor is kept iff
//   bits(seed, i) = mix(mix(i ^ key) + key) >= threshold,  key = mix(seed + 0x9e3779b9),
//   threshold = floor(p * 2^32)  (the golden-ratio constant keeps seed 0 off mix's fixed point 0)
// where mix is lowbias32 (Wellons' hash-prospector). Kept values are scaled by 1/(1-p).
// The same u32 arithmetic is in src/ref/dropout.ts (Math.imul, >>> 0), so masks are
// bit-identical on every machine and backward recomputes the mask instead of storing it.
// forward and backward are the same map (y = x * mask * scale, dx = dy * mask * scale): one
// entry point. p.base is the flat index of out[0] in the whole tensor (binding ranges).

override WG: u32 = 256;

struct Params {
  n: u32,         // elements in this range
  base: u32,      // index of element 0 of this range in the whole tensor
  seed: u32,
  threshold: u32,
  scale: f32,     // 1 / (1 - p), rounded to f32 on the CPU
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> inp: array<f32>;       // x or dy
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // y or dx

fn mix(v: u32) -> u32 {
  var x = v;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

@compute @workgroup_size(WG)
fn apply(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n) { return; }
  let key = mix(p.seed + 0x9e3779b9u);
  let bits = mix(mix((p.base + i) ^ key) + key);
  out[i] = select(0.0, inp[i] * p.scale, bits >= p.threshold);
}
