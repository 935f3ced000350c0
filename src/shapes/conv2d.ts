// Shape rules of 2-D convolution (NCHW, weights [Cout, Cin, KH, KW], no groups, no dilation):
// params, geometry, output shape and the batch chunking for storage binding limits. Pure: the
// WebGPU kernels (src/ops/conv2d.ts), the wasm engine and the model graph share these rules.
import { check, VtError } from '../errors.ts';
import { shapeStr } from './shape.ts';

export interface Conv2dParams {
  /** Step between output positions: one number for both axes or [vertical, horizontal]. */
  stride: number | readonly [number, number];
  /** Zero padding on each side: one number or [top and bottom, left and right]. */
  pad: number | readonly [number, number];
}

/** Everything the kernels need, derived from the shapes and params. */
export interface Conv2dGeometry {
  n: number; cin: number; h: number; w: number;
  cout: number; kh: number; kw: number;
  oh: number; ow: number;
  sh: number; sw: number; ph: number; pw: number;
}

const pair = (v: number | readonly [number, number]): [number, number] => (typeof v === 'number' ? [v, v] : [v[0], v[1]]);

/** Validates shapes and params; throws a 'bad-shape' VtError that says what does not fit. */
export function normalizeConv2d(xShape: readonly number[], wShape: readonly number[], params: Conv2dParams, what = 'conv2d'): Conv2dGeometry {
  check(xShape.length === 4, what, () => `x must be [N, Cin, H, W], got ${shapeStr(xShape)}`);
  check(wShape.length === 4, what, () => `w must be [Cout, Cin, KH, KW], got ${shapeStr(wShape)}`);
  const [n, cin, h, w] = xShape as [number, number, number, number];
  const [cout, wcin, kh, kw] = wShape as [number, number, number, number];
  check(wcin === cin, what, () => `x has ${cin} channels but w ${shapeStr(wShape)} expects ${wcin}`);
  check(typeof params === 'object' && params !== null && params.stride !== undefined && params.pad !== undefined, what,
    () => `params must give stride and pad (each a number or a [vertical, horizontal] pair), got ${JSON.stringify(params)}`);
  const [sh, sw] = pair(params.stride);
  const [ph, pw] = pair(params.pad);
  check([sh, sw].every((s) => Number.isInteger(s) && s >= 1), what, () => `stride must be integers >= 1, got ${String(params.stride)}`);
  check([ph, pw].every((s) => Number.isInteger(s) && s >= 0), what, () => `pad must be integers >= 0, got ${String(params.pad)}`);
  check([n, cin, h, w, cout, kh, kw].every((d) => Number.isInteger(d) && d >= 1), what,
    () => `empty or non-integer dimension in x ${shapeStr(xShape)} or w ${shapeStr(wShape)}`);
  check(h + 2 * ph >= kh && w + 2 * pw >= kw, what, () => `kernel ${kh}x${kw} is larger than the padded input ${h + 2 * ph}x${w + 2 * pw}`);
  const oh = Math.floor((h + 2 * ph - kh) / sh) + 1;
  const ow = Math.floor((w + 2 * pw - kw) / sw) + 1;
  return { n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw };
}

/** Output shape [N, Cout, OH, OW] with OH = floor((H + 2*ph - KH) / sh) + 1 (likewise OW). */
export function conv2dShape(xShape: readonly number[], wShape: readonly number[], params: Conv2dParams): number[] {
  const g = normalizeConv2d(xShape, wShape, params);
  return [g.n, g.cout, g.oh, g.ow];
}

/** Options of the backward passes. */
export interface Conv2dBackwardOptions {
  /** Add into the output (dw += ..., dx += ...) instead of overwriting it: sums micro-batches. */
  accumulate?: boolean;
}

/** The two device limits that decide how a batch is split (a GPUSupportedLimits fits). */
export interface Conv2dBindingLimits { maxStorageBufferBindingSize: number; minStorageBufferOffsetAlignment: number }

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * Batch ranges [start, count] such that every per-sample tensor of a range fits one storage
 * binding and each range starts at an aligned byte offset. One range when everything fits.
 */
export function conv2dBatchChunks(limits: Conv2dBindingLimits, g: Conv2dGeometry, what: string): [number, number][] {
  const n = g.n;
  const perSample = [g.cin * g.h * g.w, g.cout * g.oh * g.ow];
  const maxBytes = limits.maxStorageBufferBindingSize;
  const wBytes = g.cout * g.cin * g.kh * g.kw * 4;
  if (wBytes > maxBytes) {
    throw new VtError('too-large', `${what}: the filter [${g.cout}, ${g.cin}, ${g.kh}, ${g.kw}] (${Math.ceil(wBytes / 2 ** 20)} MiB) `
      + `exceeds this device's ${Math.floor(maxBytes / 2 ** 20)} MiB storage binding limit: use fewer channels.`);
  }
  const biggest = Math.max(...perSample) * 4;
  if (biggest * n <= maxBytes) return [[0, n]];
  const align = limits.minStorageBufferOffsetAlignment;
  // Smallest sample count whose byte size is a multiple of the alignment, for every tensor.
  let step = 1;
  for (const e of perSample) {
    const k = align / gcd((e * 4) % align || align, align);
    step = (step * k) / gcd(step, k);
  }
  const chunk = Math.floor(maxBytes / biggest / step) * step;
  if (chunk === 0) {
    throw new VtError('too-large', `${what}: ${Math.ceil(biggest / 2 ** 20)} MiB per sample (in steps of ${step} samples for ${align}-byte alignment) `
      + `exceeds this device's ${Math.floor(maxBytes / 2 ** 20)} MiB storage binding limit: use a smaller image or batch.`);
  }
  const out: [number, number][] = [];
  for (let s = 0; s < n; s += chunk) out.push([s, Math.min(chunk, n - s)]);
  return out;
}
