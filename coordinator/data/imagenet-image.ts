// One source image to a size x size sRGB JPEG for a shard (shorter side to `size`, centre
// crop, EXIF orientation applied), deciding for each bad file what to do:
//   empty file, bytes no codec reads, a truncated JPEG     -> skipped
//   more pixels than `maxPixels` (default 89.5 M)         -> skipped, before it is decoded
//   CMYK (ImageNet has 22), greyscale, 16-bit, alpha,     -> converted (re-encoded as RGB JPEG)
//   PNG/GIF/... bytes under a .JPEG name (ImageNet has 1)
// Truncated JPEGs are skipped, not decoded: libvips stops at the premature end, and the rest
// of the image would be grey, which is not what the label says. So is any JPEG whose decode
// libjpeg warns about (sharp's failOn 'warning'): a build should not guess at damaged data.

import sharp, { type Metadata } from 'sharp';
import { makeImage, type RawImage } from '../../src/data/image.ts';

/** Pillow's decompression-bomb limit (1 GiB / 4 / 3 pixels); sharp's own default is 3x higher. */
export const DEFAULT_MAX_PIXELS = 89_478_485;

export interface PrepareOptions {
  readonly size: number;
  /** JPEG quality of re-encoded images (default 90). */
  readonly quality?: number;
  readonly maxPixels?: number;
}

export type Prepared =
  | { readonly ok: true; readonly raw: RawImage; readonly bytes: Uint8Array; readonly converted: string | null }
  | { readonly ok: false; readonly reason: string };

const short = (e: unknown): string => (e instanceof Error ? e.message : String(e)).split('\n')[0].slice(0, 160);

function expectedFormat(name: string): string | null {
  if (/\.jpe?g$/i.test(name)) return 'jpeg';
  if (/\.png$/i.test(name)) return 'png';
  return null;
}

/** What `meta` says needs converting (empty when the file is a plain 8-bit RGB image of its named format). */
function conversions(meta: Metadata, name: string): string[] {
  const what: string[] = [];
  const want = expectedFormat(name);
  if (want && meta.format !== want) what.push(`${meta.format.toUpperCase()} data under a .${name.split('.').pop()} name`);
  if (meta.space === 'cmyk') what.push('CMYK converted to sRGB');
  else if (meta.space === 'b-w' || meta.space === 'grey16' || meta.channels === 1 || meta.channels === 2) what.push('greyscale converted to RGB');
  else if (meta.space !== 'srgb' && meta.space !== 'rgb16') what.push(`${meta.space ?? 'unknown'} colour space converted to sRGB`);
  if (meta.depth && meta.depth !== 'uchar') what.push(`${meta.depth} samples converted to 8-bit`);
  if (meta.hasAlpha) what.push('alpha channel dropped');
  if ((meta.pages ?? 1) > 1) what.push(`first of ${meta.pages} frames used`);
  return what;
}

/** Whether a JPEG's last bytes hold its end-of-image marker (FF D9; some files carry junk after it). */
function hasJpegEnd(bytes: Uint8Array): boolean {
  for (let i = bytes.length - 2; i >= Math.max(0, bytes.length - 256); i--) if (bytes[i] === 0xff && bytes[i + 1] === 0xd9) return true;
  return false;
}

async function decodeResized(bytes: Uint8Array, size: number): Promise<RawImage> {
  const { data, info } = await sharp(bytes, { limitInputPixels: false })
    .rotate()
    .resize(size, size, { fit: 'cover', position: 'centre' })
    .removeAlpha()
    .toColourspace('srgb')
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 3 || info.width !== size || info.height !== size) {
    throw new Error(`decoded to ${info.width}x${info.height}x${info.channels}, not ${size}x${size}x3`);
  }
  return makeImage(size, size, 3, new Uint8Array(data.buffer, data.byteOffset, data.length));
}

async function encodeJpeg(raw: RawImage, quality: number): Promise<Uint8Array> {
  const jpeg = await sharp(raw.data, { raw: { width: raw.width, height: raw.height, channels: 3 } }).jpeg({ quality }).toBuffer();
  return new Uint8Array(jpeg.buffer, jpeg.byteOffset, jpeg.length);
}

/** The shard image of one file (`name` is its path, for the format its extension promises), or why it is skipped. */
export async function prepareImage(bytes: Uint8Array, name: string, o: PrepareOptions): Promise<Prepared> {
  if (bytes.length === 0) return { ok: false, reason: 'empty file (0 bytes)' };
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (e) {
    return { ok: false, reason: `not an image any codec here reads (${short(e)})` };
  }
  const pixels = (meta.width ?? 0) * (meta.height ?? 0);
  const max = o.maxPixels ?? DEFAULT_MAX_PIXELS;
  if (pixels > max) return { ok: false, reason: `too large: ${meta.width}x${meta.height} is over the ${max}-pixel limit (not decoded; shrink it first)` };
  if (pixels === 0) return { ok: false, reason: 'no image size in its header' };
  let raw: RawImage;
  try {
    raw = await decodeResized(bytes, o.size);
  } catch (e) {
    const why = short(e);
    if (meta.format === 'jpeg' && !hasJpegEnd(bytes)) return { ok: false, reason: `truncated JPEG: no end-of-image marker (${why})` };
    return { ok: false, reason: `could not be decoded (${why})` };
  }
  const what = conversions(meta, name);
  const asIs = what.length === 0 && meta.format === 'jpeg' && meta.width === o.size && meta.height === o.size && (meta.orientation ?? 1) === 1;
  return { ok: true, raw, bytes: asIs ? bytes : await encodeJpeg(raw, o.quality ?? 90), converted: what.length > 0 ? what.join(', ') : null };
}
