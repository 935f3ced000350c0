// Half-precision wire formats: float16 (IEEE binary16) and bfloat16, both rounded to nearest
// even. Only the wire is half precision: receivers decode into float32 and accumulate there.
// Decoding goes through one 65,536-entry table per format (256 KiB each, built on first use).

export type HalfFormat = 'f16' | 'bf16';

/** float32 bit pattern -> float16 bit pattern, round to nearest even; NaN stays NaN, overflow -> Inf. */
export function f32BitsToF16(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  const mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 112; // rebias 127 -> 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half: value = m * 2^-24 with m = (1.mant) shifted right by 14 - e.
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (h & 1) !== 0)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (and rounds 65520+ up to Inf).
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0)) h++;
  return sign | h;
}

/** float32 bit pattern -> bfloat16 bit pattern, round to nearest even; NaN stays NaN. */
export function f32BitsToBf16(u: number): number {
  if ((u & 0x7f800000) === 0x7f800000 && (u & 0x7fffff) !== 0) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

const tables: Partial<Record<HalfFormat, Float32Array>> = {};

function buildTable(fmt: HalfFormat): Float32Array {
  const t = new Float32Array(65536);
  if (fmt === 'bf16') {
    new Uint32Array(t.buffer).forEach((_, i, a) => { a[i] = i << 16; });
    return t;
  }
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >>> 10) & 0x1f;
    const m = h & 0x3ff;
    t[h] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m !== 0 ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return t;
}

export function decodeTable(fmt: HalfFormat): Float32Array {
  return (tables[fmt] ??= buildTable(fmt));
}

/** dst[i] = half(src[i]). */
export function encodeHalf(src: Float32Array, dst: Uint16Array, fmt: HalfFormat): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const n = src.length;
  if (fmt === 'bf16') for (let i = 0; i < n; i++) dst[i] = f32BitsToBf16(bits[i]);
  else for (let i = 0; i < n; i++) dst[i] = f32BitsToF16(bits[i]);
}

/** dst[i] += float(src[i]) (accumulation stays float32). */
export function decodeHalfAdd(src: Uint16Array, dst: Float32Array, fmt: HalfFormat): void {
  const t = decodeTable(fmt);
  for (let i = 0; i < src.length; i++) dst[i] += t[src[i]];
}

/** dst[i] = float(src[i]). */
export function decodeHalfSet(src: Uint16Array, dst: Float32Array, fmt: HalfFormat): void {
  const t = decodeTable(fmt);
  for (let i = 0; i < src.length; i++) dst[i] = t[src[i]];
}
