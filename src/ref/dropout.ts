// float64 reference: inverted dropout with the SAME u32 hash as shaders/dropout.wgsl
// (Math.imul and >>> 0 reproduce WGSL's wrapping u32 arithmetic), so masks match bit for bit.
import { dropoutShape, dropoutThreshold, type DropoutParams } from '../shapes/dropout.ts';

/** lowbias32 (Wellons' hash-prospector). */
export function mix32(v: number): number {
  let x = v >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/** The 32 random bits of element `index` under `seed`. */
export function dropoutBits(seed: number, index: number): number {
  const key = mix32(seed + 0x9e3779b9);
  return mix32(mix32(index ^ key) + key);
}

/** 1 where element i is kept, 0 where dropped. */
export function dropoutMask(n: number, params: DropoutParams): Uint8Array {
  dropoutShape([n], params);
  const t = dropoutThreshold(params.p);
  return Uint8Array.from({ length: n }, (_, i) => (dropoutBits(params.seed, i) >= t ? 1 : 0));
}

export function dropoutForward(x: Float64Array, params: DropoutParams): Float64Array {
  const mask = dropoutMask(x.length, params);
  return x.map((v, i) => (mask[i] ? v / (1 - params.p) : 0));
}

/** The same map as forward: the gradient passes where the element was kept. */
export function dropoutBackward(dy: Float64Array, params: DropoutParams): Float64Array {
  return dropoutForward(dy, params);
}
