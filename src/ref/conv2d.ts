// float64 reference: 2-D convolution, NCHW, weights [Cout, Cin, KH, KW], no bias.
// Plain loops written straight from the definition, so they are easy to trust:
//   out[n, co, oh, ow] = sum_{ci, kh, kw} x[n, ci, oh*sh - ph + kh, ow*sw - pw + kw] * w[co, ci, kh, kw]
// (input positions outside the image count as zero). The backward passes scatter the same
// products the forward gathers, which is the simplest correct form (the GPU gathers).
// The output size and padding are computed here, not by the engines' normalizeConv2d (which
// this reference checks): OH = floor((H + 2*ph - KH) / sh) + 1, likewise OW.
import { check } from '../errors.ts';
import type { Conv2dGeometry, Conv2dParams } from '../shapes/conv2d.ts';

export type { Conv2dParams };

/** Calls f(xIndex, wIndex, outIndex) for every product term of the forward sum. */
function eachTerm(g: Conv2dGeometry, f: (xi: number, wi: number, oi: number) => void): void {
  const { n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw } = g;
  for (let b = 0; b < n; b++)
    for (let co = 0; co < cout; co++)
      for (let y = 0; y < oh; y++)
        for (let x = 0; x < ow; x++) {
          const oi = ((b * cout + co) * oh + y) * ow + x;
          for (let ci = 0; ci < cin; ci++)
            for (let ky = 0; ky < kh; ky++) {
              const iy = y * sh - ph + ky;
              if (iy < 0 || iy >= h) continue;
              for (let kx = 0; kx < kw; kx++) {
                const ix = x * sw - pw + kx;
                if (ix < 0 || ix >= w) continue;
                f(((b * cin + ci) * h + iy) * w + ix, ((co * cin + ci) * kh + ky) * kw + kx, oi);
              }
            }
        }
}

/** The reference's own geometry; throws a 'bad-shape' VtError for shapes or params that do not fit. */
function geometry(xShape: readonly number[], wShape: readonly number[], params: Conv2dParams): Conv2dGeometry {
  const what = 'ref.conv2d';
  check(xShape.length === 4 && wShape.length === 4, what, () => `x must be [N, Cin, H, W] and w [Cout, Cin, KH, KW], got [${xShape}] and [${wShape}]`);
  const [n, cin, h, w] = xShape as [number, number, number, number];
  const [cout, wcin, kh, kw] = wShape as [number, number, number, number];
  const [sh, sw] = typeof params.stride === 'number' ? [params.stride, params.stride] : params.stride;
  const [ph, pw] = typeof params.pad === 'number' ? [params.pad, params.pad] : params.pad;
  const positive = [n, cin, h, w, cout, kh, kw, sh, sw].every((d) => Number.isInteger(d) && d >= 1);
  check(positive && Number.isInteger(ph) && Number.isInteger(pw) && ph >= 0 && pw >= 0, what, () => `dimensions and strides must be integers >= 1, pads >= 0`);
  check(wcin === cin, what, () => `x has ${cin} channels, w expects ${wcin}`);
  const oh = Math.floor((h + 2 * ph - kh) / sh) + 1;
  const ow = Math.floor((w + 2 * pw - kw) / sw) + 1;
  check(oh >= 1 && ow >= 1, what, () => `kernel ${kh}x${kw} is larger than the padded input ${h + 2 * ph}x${w + 2 * pw}`);
  return { n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw };
}

/** x [N, Cin, H, W], w [Cout, Cin, KH, KW] -> out [N, Cout, OH, OW]. */
export function conv2dForward(x: Float64Array, xShape: readonly number[], w: Float64Array, wShape: readonly number[], params: Conv2dParams): Float64Array {
  const g = geometry(xShape, wShape, params);
  const out = new Float64Array(g.n * g.cout * g.oh * g.ow);
  eachTerm(g, (xi, wi, oi) => {
    out[oi]! += x[xi]! * w[wi]!;
  });
  return out;
}

/** dy [N, Cout, OH, OW], w -> dx [N, Cin, H, W]. */
export function conv2dBackwardInput(
  dy: Float64Array, w: Float64Array, xShape: readonly number[], wShape: readonly number[], params: Conv2dParams,
): Float64Array {
  const g = geometry(xShape, wShape, params);
  const dx = new Float64Array(g.n * g.cin * g.h * g.w);
  eachTerm(g, (xi, wi, oi) => {
    dx[xi]! += dy[oi]! * w[wi]!;
  });
  return dx;
}

/** x, dy -> dw [Cout, Cin, KH, KW]. */
export function conv2dBackwardFilter(
  x: Float64Array, dy: Float64Array, xShape: readonly number[], wShape: readonly number[], params: Conv2dParams,
): Float64Array {
  const g = geometry(xShape, wShape, params);
  const dw = new Float64Array(g.cout * g.cin * g.kh * g.kw);
  eachTerm(g, (xi, wi, oi) => {
    dw[wi]! += dy[oi]! * x[xi]!;
  });
  return dw;
}
