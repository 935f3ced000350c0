// Browser / Worker decoder: ImageDecoder (WebCodecs) where it exists, else createImageBitmap;
// pixels are read back through an OffscreenCanvas (one per size, reused).

import { DataError } from './errors.ts';
import { fromRgba, type Decoder, type RawImage } from './image.ts';
import type { ImageEncoding } from './manifest.ts';

const MIME: Record<ImageEncoding, string> = { png: 'image/png', jpg: 'image/jpeg' };
const canvases = new Map<string, OffscreenCanvasRenderingContext2D>();

function context(width: number, height: number): OffscreenCanvasRenderingContext2D {
  const key = `${width}x${height}`;
  let ctx = canvases.get(key);
  if (!ctx) {
    const c = new OffscreenCanvas(width, height).getContext('2d', { willReadFrequently: true });
    if (!c) {
      throw new DataError(
        'decode-failed', 'OffscreenCanvas has no 2d context here; use a browser with OffscreenCanvas (Chrome 69+, Firefox 105+, Safari 16.4+)',
      );
    }
    ctx = c;
    canvases.set(key, ctx);
  }
  return ctx;
}

function pixels(source: CanvasImageSource, width: number, height: number, channels: 1 | 3): RawImage {
  const ctx = context(width, height);
  ctx.clearRect(0, 0, width, height);
  ctx.drawImage(source, 0, 0);
  return fromRgba(ctx.getImageData(0, 0, width, height).data, height, width, channels);
}

async function decodeOne(bytes: Uint8Array, encoding: ImageEncoding, channels: 1 | 3): Promise<RawImage> {
  const data = bytes as Uint8Array<ArrayBuffer>;
  if (typeof ImageDecoder !== 'undefined') {
    const d = new ImageDecoder({ data, type: MIME[encoding], colorSpaceConversion: 'none' });
    try {
      const { image } = await d.decode();
      try {
        return pixels(image, image.displayWidth, image.displayHeight, channels);
      } finally {
        image.close();
      }
    } finally {
      d.close();
    }
  }
  const bmp = await createImageBitmap(new Blob([data], { type: MIME[encoding] }), {
    colorSpaceConversion: 'none',
    premultiplyAlpha: 'none',
  });
  try {
    return pixels(bmp, bmp.width, bmp.height, channels);
  } finally {
    bmp.close();
  }
}

export const browserDecoder: Decoder = {
  async decode(bytes, encoding, channels) {
    try {
      return await decodeOne(bytes, encoding, channels);
    } catch (e) {
      if (e instanceof DataError) throw e;
      throw new DataError('decode-failed', `cannot decode a ${encoding} of ${bytes.length} bytes (${String(e)})`, { cause: e });
    }
  },
};
