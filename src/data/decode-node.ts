// Node decoder: PNGs of the kinds shards hold through the small codec in png.ts (node:zlib,
// synchronous, ~20x faster than sharp on 32x32 images); JPEGs and other PNGs through sharp.
// Grey and RGB output whatever the file holds (alpha dropped).

import { promisify } from 'node:util';
import { deflateSync, gunzip, inflateSync } from 'node:zlib';
import sharp from 'sharp';
import { DataError } from './errors.ts';
import { makeImage, type Decoder, type RawImage } from './image.ts';
import type { ImageEncoding } from './manifest.ts';
import { decodePng, type Zlib } from './png.ts';

const gunzipAsync = promisify(gunzip);

/** Whole-shard gunzip on libuv's thread pool (BatchLoaderOptions.gunzip in Node). */
export async function nodeGunzip(b: Uint8Array): Promise<Uint8Array> {
  const out = await gunzipAsync(b);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

export const nodeZlib: Zlib = {
  deflate: (b) => deflateSync(b, { level: 9 }),
  inflate: (b) => inflateSync(b),
};

// Tiny images: libvips' own thread pool only adds overhead; Promise-level parallelism
// (the libuv pool) spreads whole images over the cores instead.
sharp.concurrency(1);

export async function decodeWithSharp(bytes: Uint8Array, encoding: ImageEncoding, channels: 1 | 3): Promise<RawImage> {
  const p = sharp(bytes, { failOn: 'error' }).removeAlpha();
  const out = await (channels === 1 ? p.greyscale() : p.toColourspace('srgb'))
    .raw()
    .toBuffer({ resolveWithObject: true })
    .catch((e: unknown) => {
      throw new DataError('decode-failed', `cannot decode a ${encoding} of ${bytes.length} bytes (${String(e)})`, { cause: e });
    });
  const { width, height, channels: got } = out.info;
  if (got !== channels) {
    throw new DataError('decode-failed', `a ${encoding} decoded to ${got} channels where ${channels} were asked for`);
  }
  return makeImage(height, width, channels, new Uint8Array(out.data.buffer, out.data.byteOffset, out.data.length));
}

export const nodeDecoder: Decoder = {
  async decode(bytes, encoding, channels) {
    if (encoding === 'png') {
      const img = decodePngOrFail(bytes, channels);
      if (img) return img;
    }
    return decodeWithSharp(bytes, encoding, channels);
  },
};

function decodePngOrFail(bytes: Uint8Array, channels: 1 | 3): RawImage | null {
  try {
    return decodePng(bytes, channels, nodeZlib);
  } catch (e) {
    if (e instanceof DataError) throw e;
    throw new DataError('decode-failed', `corrupt PNG of ${bytes.length} bytes (${String(e)})`, { cause: e });
  }
}
