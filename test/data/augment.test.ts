import { describe, expect, it } from 'vitest';
import { augment, cropWindow, normalizeInto, outputSize, randomResizedBox, resizeBilinear, sampleRng, type AugmentSpec } from '../../src/data/augment.ts';
import { makeImage, type RawImage } from '../../src/data/image.ts';
import { makeRng } from '../../src/rng.ts';
import { countingImage, randomImage } from './helpers.ts';

const rows = (img: RawImage, c = 0): number[][] =>
  Array.from({ length: img.height }, (_, y) => Array.from({ length: img.width }, (_, x) => img.data[(y * img.width + x) * img.channels + c]));

describe('crop and flip', () => {
  const img = countingImage(3, 3, 1);

  it('crops a window, zero outside the image (padding)', () => {
    expect(rows(cropWindow(img, 0, 0, 3, 3, false))).toEqual([
      [0, 1, 2],
      [10, 11, 12],
      [20, 21, 22],
    ]);
    expect(rows(cropWindow(img, -1, -1, 3, 3, false))).toEqual([
      [0, 0, 0],
      [0, 0, 1],
      [0, 10, 11],
    ]);
    expect(rows(cropWindow(img, 1, 2, 3, 2, false))).toEqual([
      [12, 0],
      [22, 0],
      [0, 0],
    ]);
  });

  it('mirrors the window left-right, per channel', () => {
    const rgb = countingImage(2, 3, 3);
    const f = cropWindow(rgb, 0, 0, 2, 3, true);
    expect(rows(f, 0)).toEqual([
      [2, 1, 0],
      [12, 11, 10],
    ]);
    expect(rows(f, 2)).toEqual([
      [202, 201, 200],
      [212, 211, 210],
    ]);
    // The mirror of a padded window is the padded window of the mirror.
    expect(rows(cropWindow(img, 0, -1, 3, 3, true))).toEqual([
      [1, 0, 0],
      [11, 10, 0],
      [21, 20, 0],
    ]);
  });
});

describe('bilinear resize', () => {
  it('is the identity at the same size', () => {
    const img = randomImage(1, 5, 7, 3);
    expect(resizeBilinear(img, 0, 0, 5, 7, 5, 7).data).toEqual(img.data);
  });

  it('matches hand-computed values (pixel centres aligned, edges clamped)', () => {
    const line = makeImage(1, 2, 1, Uint8Array.from([0, 100]));
    expect(Array.from(resizeBilinear(line, 0, 0, 1, 2, 1, 4).data)).toEqual([0, 25, 75, 100]);
    const four = makeImage(1, 4, 1, Uint8Array.from([0, 10, 20, 30]));
    expect(Array.from(resizeBilinear(four, 0, 0, 1, 4, 1, 2).data)).toEqual([5, 25]);
    expect(Array.from(resizeBilinear(four, 0, 0, 1, 4, 1, 2, true).data)).toEqual([25, 5]);
  });

  it('center-crop of the middle half at half size is that exact window', () => {
    const img = randomImage(2, 8, 8, 3);
    const out = augment(img, { kind: 'center-crop', size: 4, fraction: 0.5 }, makeRng(0));
    expect(out.data).toEqual(cropWindow(img, 2, 2, 4, 4, false).data);
  });
});

describe('random choices', () => {
  it('random-resized boxes stay inside the image within scale and ratio', () => {
    const rng = makeRng(3);
    for (let i = 0; i < 500; i++) {
      const b = randomResizedBox(rng, 48, 64, [0.08, 1], [3 / 4, 4 / 3]);
      expect(b.top).toBeGreaterThanOrEqual(0);
      expect(b.left).toBeGreaterThanOrEqual(0);
      expect(b.top + b.height).toBeLessThanOrEqual(48);
      expect(b.left + b.width).toBeLessThanOrEqual(64);
      const area = (b.height * b.width) / (48 * 64);
      expect(area).toBeGreaterThan(0.06);
      expect(b.width / b.height).toBeGreaterThan(0.7);
      expect(b.width / b.height).toBeLessThan(1.45);
    }
    // An impossible scale falls back to the central crop at the clamped ratio.
    expect(randomResizedBox(rng, 40, 80, [2, 3], [3 / 4, 4 / 3])).toEqual({ top: 0, left: 13, height: 40, width: 53 });
  });

  it('the same (seed, epoch, id) gives the same augmentation; others differ', () => {
    const img = randomImage(4, 32, 32, 3);
    const specs: AugmentSpec[] = [
      { kind: 'pad-crop-flip', pad: 4, flip: true },
      { kind: 'random-resized-crop', size: 24, scale: [0.08, 1], ratio: [3 / 4, 4 / 3], flip: true },
    ];
    for (const spec of specs) {
      const a = augment(img, spec, sampleRng(7, 2, 123));
      expect(augment(img, spec, sampleRng(7, 2, 123)).data).toEqual(a.data);
      expect(augment(img, spec, sampleRng(7, 3, 123)).data).not.toEqual(a.data);
      expect(augment(img, spec, sampleRng(7, 2, 124)).data).not.toEqual(a.data);
      expect(augment(img, spec, sampleRng(8, 2, 123)).data).not.toEqual(a.data);
      expect([a.height, a.width]).toEqual(outputSize(spec, 32, 32));
    }
  });

  it('pad-crop-flip draws every offset in [-pad, pad] and flips about half the time', () => {
    // A single bright pixel at (0, 0) shows where the window went.
    const img = makeImage(8, 8, 1);
    img.data[0] = 255;
    const seen = new Set<string>();
    let flips = 0;
    let kept = 0;
    const n = 2000;
    for (let id = 0; id < n; id++) {
      const out = augment(img, { kind: 'pad-crop-flip', pad: 2, flip: true }, sampleRng(1, 0, id));
      const at = out.data.indexOf(255);
      if (at < 0) continue; // the window started right of or below the pixel
      kept++;
      const y = Math.floor(at / 8);
      const x = at % 8;
      const flipped = x > 3;
      if (flipped) flips++;
      seen.add(`${y},${flipped ? 7 - x : x}`);
    }
    expect(seen.size).toBe(9); // the offsets -2..0 (of -2..2) keep it, at y, x in {0, 1, 2}
    expect(kept / n).toBeCloseTo(9 / 25, 1);
    expect(flips / kept).toBeGreaterThan(0.43);
    expect(flips / kept).toBeLessThan(0.57);
  });
});

describe('normalisation', () => {
  it('writes (v/255 - mean)/std as channel planes at the offset', () => {
    const img = makeImage(1, 2, 3, Uint8Array.from([255, 0, 51, 0, 255, 102]));
    const out = new Float32Array(2 + 6).fill(-99);
    normalizeInto(img, [0.5, 0.5, 0.2], [0.25, 0.5, 0.2], out, 2);
    const want = [-99, -99, (1 - 0.5) / 0.25, (0 - 0.5) / 0.25, (0 - 0.5) / 0.5, (1 - 0.5) / 0.5, (0.2 - 0.2) / 0.2, (0.4 - 0.2) / 0.2];
    out.forEach((v, i) => expect(v).toBeCloseTo(want[i], 5));
  });

  it('refuses mean/std of the wrong length', () => {
    expect(() => normalizeInto(makeImage(1, 1, 3), [0.5], [0.5], new Float32Array(3), 0)).toThrow(/1 means and 1 stds for a 3-channel image/);
  });
});
