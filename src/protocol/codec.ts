// The payload of a ring data frame in each wire format, in one place for every collective
// (allreduce.ts, group-chain.ts): its size, encoding (with error feedback), decoding and the
// checks a receiver makes before it adds anything in.
//
//   f32   little-endian float32 per element
//   f16   IEEE binary16 per element (half.ts), rounded to nearest even
//   bf16  bfloat16 per element (half.ts), rounded to nearest even
//   i8    one float32 scale s, then one int8 q per element: the value is q * s. s is a power of
//         two: the smallest with max|x| <= 127 s (so max|q| is 64..127), q = round(x / s).
//         Decoding is exact (q * 2^k), so encoding decoded values again gives the same bytes:
//         a peer that passes on a value it received (the all-gather) sends exactly what the
//         owner sent, and every peer ends with the same bits, as on the other wires.
//
// Error feedback (the int8 wire of a job; as INTELLECT-1's int8 all-reduce, with DGC's and
// 1-bit LAMB's rule of keeping what compression dropped): every value a peer encodes, its own
// gradient or a partial sum it passes on, loses (x - decoded) on the wire. With `feedback` the
// encoder adds that loss into the peer's buffer; the peer adds the buffer into its next step's
// gradient, so what one step's sum lost arrives one step late instead of never.
import { decodeHalfAdd, decodeHalfSet, decodeTable, encodeHalf } from './half.ts';

/** The payload formats, in the order of their header dtype code (0, 1, 2, 3). */
export const WIRE_FORMATS = ['f32', 'f16', 'bf16', 'i8'] as const;
export type WireFormat = (typeof WIRE_FORMATS)[number];

/** Bytes per element of each format. */
export const BYTES_PER_ELEMENT: Record<WireFormat, number> = { f32: 4, f16: 2, bf16: 2, i8: 1 };
/** Bytes a frame's payload carries besides its elements: the int8 wire's scale. */
export const PAYLOAD_EXTRA: Record<WireFormat, number> = { f32: 0, f16: 0, bf16: 0, i8: 4 };

/** Payload bytes of `len` elements. */
export function payloadBytes(wire: WireFormat, len: number): number {
  return PAYLOAD_EXTRA[wire] + len * BYTES_PER_ELEMENT[wire];
}

/** Elements per data frame of `messageBytes` (header included). */
export function elementsPerFrame(wire: WireFormat, messageBytes: number, headerBytes: number): number {
  return Math.floor((messageBytes - headerBytes - PAYLOAD_EXTRA[wire]) / BYTES_PER_ELEMENT[wire]);
}

/** The smallest frame of one element. */
export function minFrameBytes(wire: WireFormat, headerBytes: number): number {
  return headerBytes + payloadBytes(wire, 1);
}

const Q_MAX = 127;
/** The smallest int8 scale exponent: 2^-133 * 127 still decodes exactly in float32 (subnormal). */
const MIN_EXP = -133;

/**
 * The int8 scale of values whose largest magnitude is `absmax`: the smallest power of two s
 * (not below 2^MIN_EXP) with absmax <= 127 s. NaN when absmax is not finite.
 */
export function int8Scale(absmax: number): number {
  if (!Number.isFinite(absmax)) return Number.NaN;
  if (absmax === 0) return 2 ** MIN_EXP;
  let k = Math.max(MIN_EXP, Math.ceil(Math.log2(absmax / Q_MAX)));
  // log2 may be off by one near a power of two: settle k exactly.
  while (2 ** k * Q_MAX < absmax) k++;
  while (k > MIN_EXP && 2 ** (k - 1) * Q_MAX >= absmax) k--;
  return 2 ** k;
}

function absMax(src: Float32Array): number {
  let m = 0;
  for (let i = 0; i < src.length; i++) {
    const a = Math.abs(src[i]!);
    if (a > m) m = a;
    else if (a !== a) return Number.NaN; // NaN fails every comparison
  }
  return m;
}

export interface EncodeOptions {
  /** Write the decoded values back into `src` (the owner of a sum keeps what the others receive). */
  keepRounded: boolean;
  /** Adds src - decoded(src) here (same length as src): the error feedback buffer. */
  feedback?: Float32Array;
}

/** Encodes `src` into `out` (payloadBytes(wire, src.length) bytes, any alignment). */
export function encodePayload(src: Float32Array, out: Uint8Array, wire: WireFormat, o: EncodeOptions): void {
  const len = src.length;
  const fb = o.feedback;
  if (fb && fb.length !== len) throw new Error(`error feedback buffer of ${fb.length} floats for ${len} values`);
  if (wire === 'f32') {
    aligned(out, 4, len, (buf, at) => new Float32Array(buf, at, len).set(src));
    return;
  }
  if (wire === 'f16' || wire === 'bf16') {
    aligned(out, 2, len, (buf, at) => {
      const half = new Uint16Array(buf, at, len);
      encodeHalf(src, half, wire);
      const t = decodeTable(wire);
      finish(src, o, (i) => t[half[i]!]!);
    });
    return;
  }
  const scale = int8Scale(absMax(src));
  new DataView(out.buffer, out.byteOffset, 4).setFloat32(0, scale, true);
  const q = new Int8Array(out.buffer, out.byteOffset + 4, len);
  const inv = 1 / scale; // exact: a power of two
  for (let i = 0; i < len; i++) {
    const r = Math.round(src[i]! * inv);
    q[i] = r > Q_MAX ? Q_MAX : r < -Q_MAX ? -Q_MAX : r;
  }
  finish(src, o, (i) => q[i]! * scale);
}

/** Error feedback and keepRounded from the decoded value of each element (`dec(i)`), in place: no copy per frame. */
function finish(src: Float32Array, o: EncodeOptions, dec: (i: number) => number): void {
  const fb = o.feedback;
  if (fb) {
    for (let i = 0; i < src.length; i++) {
      const d = Math.fround(dec(i));
      fb[i] = fb[i]! + (src[i]! - d);
      if (o.keepRounded) src[i] = d;
    }
  } else if (o.keepRounded) for (let i = 0; i < src.length; i++) src[i] = dec(i);
}

/** Runs `f` on a view of `bytes`' first `len * bpe` bytes that is aligned to `bpe` (through a copy when it is not). */
function aligned(bytes: Uint8Array, bpe: number, len: number, f: (buf: ArrayBufferLike, at: number) => void): void {
  if (bytes.byteOffset % bpe === 0) {
    f(bytes.buffer, bytes.byteOffset);
    return;
  }
  const tmp = new Uint8Array(len * bpe);
  tmp.set(bytes.subarray(0, len * bpe));
  f(tmp.buffer, 0);
  bytes.set(tmp);
}

/** A copy of `bytes` aligned to `bpe` when it is not (for reading). */
function readable(bytes: Uint8Array, bpe: number, n: number): { buf: ArrayBufferLike; at: number } {
  if (bytes.byteOffset % bpe === 0) return { buf: bytes.buffer, at: bytes.byteOffset };
  return { buf: bytes.slice(0, n).buffer, at: 0 };
}

/** Adds (`add`) or copies (`set`) the `dst.length` values of `payload` into dst. */
export function decodePayload(payload: Uint8Array, dst: Float32Array, wire: WireFormat, mode: 'add' | 'set'): void {
  const len = dst.length;
  if (wire === 'f32') {
    const { buf, at } = readable(payload, 4, 4 * len);
    const src = new Float32Array(buf, at, len);
    if (mode === 'set') dst.set(src);
    else for (let i = 0; i < len; i++) dst[i] = dst[i]! + src[i]!;
    return;
  }
  if (wire === 'f16' || wire === 'bf16') {
    const { buf, at } = readable(payload, 2, 2 * len);
    const src = new Uint16Array(buf, at, len);
    if (mode === 'set') decodeHalfSet(src, dst, wire);
    else decodeHalfAdd(src, dst, wire);
    return;
  }
  const scale = new DataView(payload.buffer, payload.byteOffset, 4).getFloat32(0, true);
  const q = new Int8Array(payload.buffer, payload.byteOffset + 4, len);
  if (mode === 'set') for (let i = 0; i < len; i++) dst[i] = q[i]! * scale;
  else for (let i = 0; i < len; i++) dst[i] = dst[i]! + q[i]! * scale;
}

/**
 * What a receiver checks before adding a payload of `len` values in: the first element that is
 * not finite (-1: none; on the int8 wire a scale that is no finite power of two counts as
 * element 0) and the values' RMS (computed only when `wantRms`, else 0).
 */
export function inspectPayload(payload: Uint8Array, wire: WireFormat, len: number, wantRms: boolean): { bad: number; rms: number } {
  if (wire === 'i8') {
    const scale = new DataView(payload.buffer, payload.byteOffset, 4).getFloat32(0, true);
    const pow2 = scale > 0 && Number.isFinite(scale) && Math.log2(scale) === Math.round(Math.log2(scale));
    if (!pow2) return { bad: 0, rms: 0 };
    if (!wantRms) return { bad: -1, rms: 0 };
    const q = new Int8Array(payload.buffer, payload.byteOffset + 4, len);
    let sq = 0;
    for (let i = 0; i < len; i++) sq += q[i]! * q[i]!;
    return { bad: -1, rms: scale * Math.sqrt(sq / Math.max(1, len)) };
  }
  let f: Float32Array;
  if (wire === 'f32') {
    const { buf, at } = readable(payload, 4, 4 * len);
    f = new Float32Array(buf, at, len);
  } else {
    const { buf, at } = readable(payload, 2, 2 * len);
    const half = new Uint16Array(buf, at, len);
    const mask = wire === 'f16' ? 0x7c00 : 0x7f80; // all-ones exponent: Inf or NaN
    const bad = half.findIndex((v) => (v & mask) === mask);
    if (bad >= 0 || !wantRms) return { bad, rms: 0 };
    f = new Float32Array(len);
    decodeHalfSet(half, f, wire);
  }
  // x * 0 is 0 for every finite x and NaN otherwise: one pass, no branch per element.
  let acc = 0;
  let sq = 0;
  for (let i = 0; i < len; i++) {
    const v = f[i]!;
    acc += v * 0;
    sq += v * v;
  }
  const bad = acc === 0 ? -1 : f.findIndex((v) => !Number.isFinite(v));
  return { bad, rms: wantRms ? Math.sqrt(sq / Math.max(1, len)) : 0 };
}
