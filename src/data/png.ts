// A small PNG codec for the images shards hold (8-bit grey / grey+alpha / RGB / RGBA, not
// interlaced): encoding for the shard builder and fast decoding for Node peers. zlib is
// injected so this file stays platform-neutral (Node passes node:zlib's sync functions).
// Anything else (palette, 16-bit, interlaced) returns null from decodePng: use sharp.

import { concatBytes } from './bytes.ts';
import { DataError } from './errors.ts';
import { makeImage, type RawImage } from './image.ts';

export interface Zlib {
  deflate(b: Uint8Array): Uint8Array;
  inflate(b: Uint8Array): Uint8Array;
}

const SIGNATURE = [137, 80, 78, 71, 13, 10, 26, 10];
const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(b: Uint8Array, from: number, to: number): number {
  let c = 0xffffffff;
  for (let i = from; i < to; i++) c = CRC_TABLE[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const v = new DataView(out.buffer);
  v.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  v.setUint32(8 + data.length, crc32(out, 4, 8 + data.length));
  return out;
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** Predictor of filter type f for byte i of a row (bpp bytes per pixel). */
function predict(f: number, row: Uint8Array, prev: Uint8Array, i: number, bpp: number): number {
  const a = i >= bpp ? row[i - bpp] : 0;
  const b = prev[i];
  const c = i >= bpp ? prev[i - bpp] : 0;
  switch (f) {
    case 0:
      return 0;
    case 1:
      return a;
    case 2:
      return b;
    case 3:
      return (a + b) >> 1;
    default:
      return paeth(a, b, c);
  }
}

/** PNG bytes of an 8-bit grey or RGB image; each row takes the filter with the least sum of |residual|. */
export function encodePng(img: RawImage, zlib: Zlib): Uint8Array {
  const { width: w, height: h, channels: bpp } = img;
  const stride = w * bpp;
  const filtered = new Uint8Array(h * (stride + 1));
  const zero = new Uint8Array(stride);
  const trial = new Uint8Array(stride);
  for (let y = 0; y < h; y++) {
    const row = img.data.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? img.data.subarray((y - 1) * stride, y * stride) : zero;
    let bestCost = Infinity;
    for (let f = 0; f < 5; f++) {
      let cost = 0;
      for (let i = 0; i < stride; i++) {
        const r = (row[i] - predict(f, row, prev, i, bpp)) & 0xff;
        trial[i] = r;
        cost += r < 128 ? r : 256 - r;
      }
      if (cost < bestCost) {
        bestCost = cost;
        filtered[y * (stride + 1)] = f;
        filtered.set(trial, y * (stride + 1) + 1);
      }
    }
  }
  const ihdr = new Uint8Array(13);
  const v = new DataView(ihdr.buffer);
  v.setUint32(0, w);
  v.setUint32(4, h);
  ihdr.set([8, bpp === 1 ? 0 : 2, 0, 0, 0], 8);
  return concatBytes([Uint8Array.from(SIGNATURE), chunk('IHDR', ihdr), chunk('IDAT', zlib.deflate(filtered)), chunk('IEND', new Uint8Array(0))]);
}

const PNG_CHANNELS: Record<number, number> = { 0: 1, 2: 3, 4: 2, 6: 4 };

/** Decodes the PNGs encodePng writes (and any 8-bit non-interlaced grey/RGB(A) PNG); null for other kinds. */
export function decodePng(png: Uint8Array, channels: 1 | 3, zlib: Zlib): RawImage | null {
  if (png.length < 8 || SIGNATURE.some((b, i) => png[i] !== b)) throw new DataError('decode-failed', 'not a PNG (bad signature)');
  const v = new DataView(png.buffer, png.byteOffset, png.byteLength);
  let w = 0;
  let h = 0;
  let src = 0;
  const idat: Uint8Array[] = [];
  for (let at = 8; at + 8 <= png.length; ) {
    const len = v.getUint32(at);
    const type = String.fromCharCode(png[at + 4], png[at + 5], png[at + 6], png[at + 7]);
    const data = png.subarray(at + 8, at + 8 + len);
    if (data.length !== len) throw new DataError('decode-failed', `PNG chunk ${type} is truncated`);
    if (type === 'IHDR') {
      w = v.getUint32(at + 8);
      h = v.getUint32(at + 12);
      src = PNG_CHANNELS[data[9]] ?? 0;
      if (data[8] !== 8 || src === 0 || data[12] !== 0) return null;
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    at += 12 + len;
  }
  if (w === 0 || h === 0 || idat.length === 0) throw new DataError('decode-failed', 'PNG has no IHDR or no IDAT');
  let z = idat[0];
  if (idat.length > 1) {
    z = new Uint8Array(idat.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of idat) {
      z.set(p, at);
      at += p.length;
    }
  }
  const raw = zlib.inflate(z);
  const stride = w * src;
  if (raw.length < h * (stride + 1)) throw new DataError('decode-failed', `PNG data holds ${raw.length} bytes, ${w}x${h} needs ${h * (stride + 1)}`);
  const pix = new Uint8Array(h * stride);
  const zero = new Uint8Array(stride);
  for (let y = 0; y < h; y++) {
    const f = raw[y * (stride + 1)];
    if (f > 4) throw new DataError('decode-failed', `PNG row ${y} has filter type ${f}`);
    const row = pix.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? pix.subarray((y - 1) * stride, y * stride) : zero;
    unfilterRow(f, raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)), row, prev, src);
  }
  return toChannels(pix, h, w, src, channels);
}

/** Undoes filter f of one row into `row` (one loop per filter: this is the hot path). */
function unfilterRow(f: number, line: Uint8Array, row: Uint8Array, prev: Uint8Array, bpp: number): void {
  const n = row.length;
  switch (f) {
    case 0:
      row.set(line);
      return;
    case 1:
      for (let i = 0; i < n; i++) row[i] = line[i] + (i >= bpp ? row[i - bpp] : 0);
      return;
    case 2:
      for (let i = 0; i < n; i++) row[i] = line[i] + prev[i];
      return;
    case 3:
      for (let i = 0; i < n; i++) row[i] = line[i] + (((i >= bpp ? row[i - bpp] : 0) + prev[i]) >> 1);
      return;
    default:
      for (let i = 0; i < n; i++) row[i] = line[i] + (i >= bpp ? paeth(row[i - bpp], prev[i], prev[i - bpp]) : prev[i]);
  }
}

function toChannels(pix: Uint8Array, h: number, w: number, src: number, channels: 1 | 3): RawImage {
  if (src === channels) return makeImage(h, w, channels, pix);
  const out = makeImage(h, w, channels);
  const grey = src <= 2;
  for (let i = 0; i < h * w; i++) {
    const p = i * src;
    if (channels === 3) {
      out.data[3 * i] = pix[p];
      out.data[3 * i + 1] = pix[grey ? p : p + 1];
      out.data[3 * i + 2] = pix[grey ? p : p + 2];
    } else {
      out.data[i] = grey ? pix[p] : Math.round(0.299 * pix[p] + 0.587 * pix[p + 1] + 0.114 * pix[p + 2]);
    }
  }
  return out;
}
