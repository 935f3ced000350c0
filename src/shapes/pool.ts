// Shape rules of 2-D pooling, NCHW (PyTorch's floor mode; padding must be < kernel): params,
// geometry, output shape and the global pool's window. Pure: the WebGPU kernels
// (src/ops/pool.ts), the wasm engine and the model graph share these rules.
import { check } from '../errors.ts';
import { shapeStr } from './shape.ts';

type Pair = number | readonly [number, number];

export interface Pool2dParams {
  /** Window size: one number or [height, width]. */
  kernel: Pair;
  /** Step between windows: one number or [vertical, horizontal]. */
  stride: Pair;
  /** Implicit padding on each side (never part of a max or an average); must be < kernel. */
  pad: Pair;
}

export interface PoolGeometry {
  n: number; c: number; h: number; w: number;
  kh: number; kw: number; sh: number; sw: number; ph: number; pw: number;
  oh: number; ow: number;
}

const pair = (v: Pair): [number, number] => (typeof v === 'number' ? [v, v] : [v[0], v[1]]);

/** Validates x's shape and the params; throws a 'bad-shape' VtError saying what is wrong. */
export function normalizePool2d(xShape: readonly number[], params: Pool2dParams, what = 'pool2d'): PoolGeometry {
  check(xShape.length === 4, what, () => `x must be [N, C, H, W], got ${shapeStr(xShape)}`);
  const [n, c, h, w] = xShape as [number, number, number, number];
  const [kh, kw] = pair(params.kernel);
  const [sh, sw] = pair(params.stride);
  const [ph, pw] = pair(params.pad);
  check([n, c, h, w, kh, kw, sh, sw].every((d) => Number.isInteger(d) && d >= 1), what,
    () => `x ${shapeStr(xShape)}, kernel and stride must be integers >= 1 (kernel ${String(params.kernel)}, stride ${String(params.stride)})`);
  // pad < kernel guarantees every window holds at least one in-image element.
  check(Number.isInteger(ph) && Number.isInteger(pw) && ph >= 0 && pw >= 0 && ph < kh && pw < kw, what,
    () => `pad must be integers in [0, kernel), got pad ${String(params.pad)} for kernel ${kh}x${kw}`);
  check(h + 2 * ph >= kh && w + 2 * pw >= kw, what, () => `window ${kh}x${kw} is larger than the padded input ${h + 2 * ph}x${w + 2 * pw}`);
  const oh = Math.floor((h + 2 * ph - kh) / sh) + 1;
  const ow = Math.floor((w + 2 * pw - kw) / sw) + 1;
  return { n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow };
}

/** Output shape [N, C, OH, OW] (floor mode). */
export function pool2dShape(xShape: readonly number[], params: Pool2dParams): number[] {
  const g = normalizePool2d(xShape, params);
  return [g.n, g.c, g.oh, g.ow];
}

/** Global average pool as a pool: one window of the whole plane. Output [N, C]. */
export function globalPoolParams(xShape: readonly number[]): Pool2dParams {
  check(xShape.length === 4, 'globalAvgPool', () => `x must be [N, C, H, W], got ${shapeStr(xShape)}`);
  return { kernel: [xShape[2]!, xShape[3]!], stride: 1, pad: 0 };
}
