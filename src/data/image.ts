// A decoded image: 8-bit samples, rows top to bottom, channels interleaved (HWC), 1 (grey)
// or 3 (RGB) channels. What decoders produce and augmentation consumes.

import { DataError } from './errors.ts';
import type { ImageEncoding } from './manifest.ts';

export interface RawImage {
  readonly data: Uint8Array;
  readonly height: number;
  readonly width: number;
  readonly channels: 1 | 3;
}

/** Decodes PNG/JPEG bytes into `channels` channels (grey images are expanded, colour averaged). */
export interface Decoder {
  decode(bytes: Uint8Array, encoding: ImageEncoding, channels: 1 | 3): Promise<RawImage>;
}

export function makeImage(height: number, width: number, channels: 1 | 3, data?: Uint8Array): RawImage {
  const n = height * width * channels;
  if (data && data.length !== n) {
    throw new DataError('bad-input', `image data holds ${data.length} bytes, ${height}x${width}x${channels} needs ${n}`);
  }
  return { data: data ?? new Uint8Array(n), height, width, channels };
}

/** Converts interleaved RGBA (what canvases and VideoFrames give) to 1 or 3 channels. */
export function fromRgba(rgba: Uint8Array | Uint8ClampedArray, height: number, width: number, channels: 1 | 3): RawImage {
  const img = makeImage(height, width, channels);
  const n = height * width;
  const out = img.data;
  if (channels === 3) {
    for (let i = 0; i < n; i++) {
      out[3 * i] = rgba[4 * i];
      out[3 * i + 1] = rgba[4 * i + 1];
      out[3 * i + 2] = rgba[4 * i + 2];
    }
  } else {
    // ITU-R BT.601 luma, as libvips and browsers use for grey.
    for (let i = 0; i < n; i++) out[i] = Math.round(0.299 * rgba[4 * i] + 0.587 * rgba[4 * i + 1] + 0.114 * rgba[4 * i + 2]);
  }
  return img;
}

/** Throws 'decode-failed' unless `img` has the size the manifest promises. */
export function checkSize(img: RawImage, height: number, width: number, what: string): RawImage {
  if (img.height !== height || img.width !== width) {
    throw new DataError('decode-failed', `${what} decoded to ${img.width}x${img.height}, the manifest says ${width}x${height}`);
  }
  return img;
}
