// Shared test helpers for the ring: deterministic random gradients and a float64 oracle.

/** Deterministic pseudo-random floats in [-1, 1) (mulberry32), so failures reproduce. */
export function randomGrad(length: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 2 ** 31 - 1;
  }
  return out;
}

/** The exact sum in float64, the oracle every peer's float32 result is compared with. */
export function sum64(grads: readonly Float32Array[]): Float64Array {
  const out = new Float64Array(grads[0]?.length ?? 0);
  for (const g of grads) for (let i = 0; i < g.length; i++) out[i] += g[i];
  return out;
}

/** Worst |got - want| / (sum of |inputs| + tiny), with its index: float32 rounding of N adds. */
export function worstError(got: Float32Array, want: Float64Array, grads: readonly Float32Array[]): { index: number; rel: number } {
  let index = -1;
  let rel = 0;
  for (let i = 0; i < got.length; i++) {
    let scale = 1e-30;
    for (const g of grads) scale += Math.abs(g[i]);
    const r = Math.abs(got[i] - want[i]) / scale;
    if (!(r <= rel)) { rel = r; index = i; } // NaN counts as worst
  }
  return { index, rel };
}

/** True when a and b hold the same bits (NaN payloads included). */
export function bitwiseEqual(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}
