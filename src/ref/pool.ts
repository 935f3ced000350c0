// float64 reference: max / average / global average pooling, NCHW, straight from the
// definitions in src/ops/pool.ts (floor mode, padding never counts, ties to the first max in
// row-major window order). Backward scatters into dx (the GPU gathers the same terms).
// The output size and padding are computed here, not by the engines' normalizePool2d (which
// this reference checks): OH = floor((H + 2*ph - KH) / sh) + 1, likewise OW, with pad < kernel.
import { check } from '../errors.ts';
import type { Pool2dParams, PoolGeometry } from '../shapes/pool.ts';

/** The reference's own geometry; throws a 'bad-shape' VtError for shapes or params that do not fit. */
function geometry(xShape: readonly number[], params: Pool2dParams, what: string): PoolGeometry {
  check(xShape.length === 4, what, () => `x must be [N, C, H, W], got [${xShape}]`);
  const [n, c, h, w] = xShape as [number, number, number, number];
  const both = (v: Pool2dParams['kernel']): readonly [number, number] => (typeof v === 'number' ? [v, v] : v);
  const [kh, kw] = both(params.kernel), [sh, sw] = both(params.stride), [ph, pw] = both(params.pad);
  check([n, c, h, w, kh, kw, sh, sw].every((d) => Number.isInteger(d) && d >= 1), what, () => `dimensions, kernel and stride must be integers >= 1`);
  // Padding at least the kernel would allow windows with no in-image element.
  check([ph, pw].every((p) => Number.isInteger(p) && p >= 0) && ph < kh && pw < kw, what, () => `pad must be integers in [0, kernel)`);
  const oh = Math.floor((h + 2 * ph - kh) / sh) + 1;
  const ow = Math.floor((w + 2 * pw - kw) / sw) + 1;
  check(oh >= 1 && ow >= 1, what, () => `window ${kh}x${kw} is larger than the padded input ${h + 2 * ph}x${w + 2 * pw}`);
  return { n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow };
}

/** Global average pooling as a pool: one window of the whole plane. */
function globalParams(xShape: readonly number[]): Pool2dParams {
  check(xShape.length === 4, 'ref.globalAvgPool', () => `x must be [N, C, H, W], got [${xShape}]`);
  return { kernel: [xShape[2]!, xShape[3]!], stride: 1, pad: 0 };
}

/** Calls f(plane, outIndexInPlane, inIndicesInPlane) for every window. */
function eachWindow(g: PoolGeometry, f: (plane: number, o: number, ins: number[]) => void): void {
  for (let plane = 0; plane < g.n * g.c; plane++)
    for (let oy = 0; oy < g.oh; oy++)
      for (let ox = 0; ox < g.ow; ox++) {
        const ins: number[] = [];
        for (let ky = 0; ky < g.kh; ky++) {
          const iy = oy * g.sh - g.ph + ky;
          if (iy < 0 || iy >= g.h) continue;
          for (let kx = 0; kx < g.kw; kx++) {
            const ix = ox * g.sw - g.pw + kx;
            if (ix >= 0 && ix < g.w) ins.push(iy * g.w + ix);
          }
        }
        f(plane, oy * g.ow + ox, ins);
      }
}

/** Returns y and argmax (index iy*W + ix within the plane). */
export function maxPoolForward(x: Float64Array, xShape: readonly number[], params: Pool2dParams): { y: Float64Array; argmax: Uint32Array } {
  const g = geometry(xShape, params, 'ref.maxPool');
  const y = new Float64Array(g.n * g.c * g.oh * g.ow);
  const argmax = new Uint32Array(y.length);
  eachWindow(g, (plane, o, ins) => {
    const base = plane * g.h * g.w;
    let best = ins[0]!;
    for (const i of ins) if (x[base + i]! > x[base + best]!) best = i;
    y[plane * g.oh * g.ow + o] = x[base + best]!;
    argmax[plane * g.oh * g.ow + o] = best;
  });
  return { y, argmax };
}

export function maxPoolBackward(dy: Float64Array, argmax: Uint32Array, xShape: readonly number[], params: Pool2dParams): Float64Array {
  const g = geometry(xShape, params, 'ref.maxPool');
  const dx = new Float64Array(g.n * g.c * g.h * g.w);
  for (let i = 0; i < dy.length; i++) {
    const plane = Math.floor(i / (g.oh * g.ow));
    dx[plane * g.h * g.w + argmax[i]!]! += dy[i]!;
  }
  return dx;
}

export function avgPoolForward(x: Float64Array, xShape: readonly number[], params: Pool2dParams): Float64Array {
  const g = geometry(xShape, params, 'ref.avgPool');
  const y = new Float64Array(g.n * g.c * g.oh * g.ow);
  eachWindow(g, (plane, o, ins) => {
    let s = 0;
    for (const i of ins) s += x[plane * g.h * g.w + i]!;
    y[plane * g.oh * g.ow + o] = s / ins.length;
  });
  return y;
}

export function avgPoolBackward(dy: Float64Array, xShape: readonly number[], params: Pool2dParams): Float64Array {
  const g = geometry(xShape, params, 'ref.avgPool');
  const dx = new Float64Array(g.n * g.c * g.h * g.w);
  eachWindow(g, (plane, o, ins) => {
    for (const i of ins) dx[plane * g.h * g.w + i]! += dy[plane * g.oh * g.ow + o]! / ins.length;
  });
  return dx;
}

/** [N, C, H, W] -> [N, C]. */
export function globalAvgPoolForward(x: Float64Array, xShape: readonly number[]): Float64Array {
  return avgPoolForward(x, xShape, globalParams(xShape));
}

export function globalAvgPoolBackward(dy: Float64Array, xShape: readonly number[]): Float64Array {
  return avgPoolBackward(dy, xShape, globalParams(xShape));
}
