// The host optimiser's two loops (src/optim/host.ts runs the step; src/optim/host-wasm.ts hands
// these its arrays): the same float64 arithmetic in the same order as the JavaScript loops there,
// so the same bits. wasm's f64 add, mul and the f32 <-> f64 conversions are IEEE's, exactly
// rounded to nearest even, and wasm never fuses a multiply into an add, as JavaScript never does.

let sumW: f64 = 0;
let sumG: f64 = 0;

/**
 * The sums of squares of w[0, len) and of g[0, len) times scale, each in index order in float64
 * (host.ts sumSquares2); read with optimSumW and optimSumG.
 */
export function optimNorms(w: usize, g: usize, len: i32, scale: f64): void {
  let ww: f64 = 0, gg: f64 = 0;
  for (let i = 0; i < len; i++) {
    const o = <usize>i * 4;
    const a = <f64>load<f32>(w + o);
    ww += a * a;
    const x = <f64>load<f32>(g + o) * scale;
    gg += x * x;
  }
  sumW = ww;
  sumG = gg;
}

export function optimSumW(): f64 {
  return sumW;
}

export function optimSumG(): f64 {
  return sumG;
}

/**
 * One segment's update of host.ts, in place on w and v over [0, len):
 *   d = g gradScale + beta w;  v = f32(m v + rate d);  w = f32(w - v), or with nesterov f32(w - (m v + rate d)).
 */
export function optimUpdate(w: usize, v: usize, g: usize, len: i32, gradScale: f64, beta: f64, rate: f64, m: f64, nesterov: bool): void {
  for (let i = 0; i < len; i++) {
    const o = <usize>i * 4;
    const wi = <f64>load<f32>(w + o);
    const d = <f64>load<f32>(g + o) * gradScale + beta * wi;
    const vi = <f64><f32>(m * <f64>load<f32>(v + o) + rate * d);
    store<f32>(v + o, <f32>vi);
    store<f32>(w + o, <f32>(nesterov ? wi - (m * vi + rate * d) : wi - vi));
  }
}
