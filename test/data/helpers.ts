// Shared by the data tests: temporary folders and small synthetic images.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect } from 'vitest';
import { makeImage, type RawImage } from '../../src/data/image.ts';
import { makeRng } from '../../src/rng.ts';

/** A fresh folder removed after the file's tests. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `vt-${prefix}-`));
  afterAll(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export function randomImage(seed: number, height: number, width: number, channels: 1 | 3): RawImage {
  const rng = makeRng(seed);
  const img = makeImage(height, width, channels);
  for (let i = 0; i < img.data.length; i++) img.data[i] = rng.int(256);
  return img;
}

/** An image whose pixel (y, x, c) is 100*c + 10*y + x: easy to read in crop/flip tests. */
export function countingImage(height: number, width: number, channels: 1 | 3): RawImage {
  const img = makeImage(height, width, channels);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) for (let c = 0; c < channels; c++)
    img.data[(y * width + x) * channels + c] = 100 * c + 10 * y + x;
  return img;
}

/** Asserts equal bytes, naming the first difference (vitest's deep equality is slow on large arrays). */
export function expectSameBytes(got: Uint8Array, want: Uint8Array): void {
  expect(got.length).toBe(want.length);
  const at = got.findIndex((b, i) => b !== want[i]);
  expect(at, `first differing byte at ${at}`).toBe(-1);
}

export function bytesOf(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}
