import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { decodeWithSharp, nodeDecoder, nodeZlib } from '../../src/data/decode-node.ts';
import { DataError } from '../../src/data/errors.ts';
import { fromRgba } from '../../src/data/image.ts';
import { decodePng, encodePng } from '../../src/data/png.ts';
import { randomImage } from './helpers.ts';

describe('PNG codec and Node decoder', () => {
  it('our PNGs decode to the same pixels with ours and with sharp (grey and RGB, odd sizes)', async () => {
    for (const [h, w, c] of [
      [1, 1, 1],
      [28, 28, 1],
      [7, 13, 3],
      [32, 32, 3],
    ] as const) {
      const img = randomImage(h * w + c, h, w, c);
      const png = encodePng(img, nodeZlib);
      expect(decodePng(png, c, nodeZlib)).toEqual(img);
      expect((await decodeWithSharp(png, 'png', c)).data).toEqual(img.data);
    }
  });

  it("reads sharp's PNGs (all filter types, alpha dropped, grey expanded to RGB)", async () => {
    const img = randomImage(9, 17, 19, 3);
    const rgba = await sharp(img.data, { raw: { width: 19, height: 17, channels: 3 } }).ensureAlpha().png({ adaptiveFiltering: true }).toBuffer();
    expect(decodePng(rgba, 3, nodeZlib)?.data).toEqual(img.data);
    const grey = randomImage(10, 5, 6, 1);
    const greyPng = encodePng(grey, nodeZlib);
    const asRgb = decodePng(greyPng, 3, nodeZlib);
    expect(asRgb?.channels).toBe(3);
    expect(Array.from(asRgb?.data.subarray(0, 3) ?? [])).toEqual([grey.data[0], grey.data[0], grey.data[0]]);
  });

  it('hands palette / 16-bit PNGs to sharp (returns null) and still decodes them', async () => {
    const img = randomImage(11, 4, 4, 3);
    const palette = await sharp(img.data, { raw: { width: 4, height: 4, channels: 3 } }).png({ palette: true }).toBuffer();
    expect(decodePng(palette, 3, nodeZlib)).toBeNull();
    expect((await nodeDecoder.decode(palette, 'png', 3)).height).toBe(4);
  });

  it('decodes JPEG with sharp', async () => {
    const img = randomImage(12, 16, 24, 3);
    const jpg = await sharp(img.data, { raw: { width: 24, height: 16, channels: 3 } }).jpeg({ quality: 95 }).toBuffer();
    const out = await nodeDecoder.decode(jpg, 'jpg', 3);
    expect([out.height, out.width, out.channels]).toEqual([16, 24, 3]);
    const grey = await nodeDecoder.decode(jpg, 'jpg', 1);
    expect(grey.channels).toBe(1);
  });

  it('corrupt images give a decode-failed DataError', async () => {
    const png = encodePng(randomImage(13, 8, 8, 3), nodeZlib);
    const cut = png.slice(0, 40);
    await expect(nodeDecoder.decode(cut, 'png', 3)).rejects.toBeInstanceOf(DataError);
    await expect(nodeDecoder.decode(new Uint8Array([1, 2, 3]), 'jpg', 3)).rejects.toMatchObject({ kind: 'decode-failed' });
    expect(() => decodePng(new Uint8Array(20), 3, nodeZlib)).toThrow(/not a PNG/);
  });

  it('RGBA from canvases converts to RGB and BT.601 grey', () => {
    const rgba = Uint8ClampedArray.from([10, 20, 30, 255, 255, 255, 255, 0]);
    expect(Array.from(fromRgba(rgba, 1, 2, 3).data)).toEqual([10, 20, 30, 255, 255, 255]);
    expect(Array.from(fromRgba(rgba, 1, 2, 1).data)).toEqual([Math.round(0.299 * 10 + 0.587 * 20 + 0.114 * 30), 255]);
  });
});
