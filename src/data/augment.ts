// Augmentation as pure functions on RawImage, with every random choice drawn from a
// generator seeded by (job seed, epoch, sample id): the same sample gets the same crop and
// flip on every peer. Then normalisation into a float NCHW batch.

import { hash32, makeRng, type Rng } from '../rng.ts';
import { DataError } from './errors.ts';
import { makeImage, type RawImage } from './image.ts';

export type AugmentSpec =
  /** The stored image as it is (evaluation of CIFAR/MNIST, or already at size). */
  | { readonly kind: 'none' }
  /** CIFAR-style: zero-pad by `pad`, random crop back to the stored size, optional h-flip. */
  | { readonly kind: 'pad-crop-flip'; readonly pad: number; readonly flip: boolean }
  /** ImageNet-style: random area `scale` and aspect `ratio` crop, bilinear resize to size x size. */
  | {
      readonly kind: 'random-resized-crop';
      readonly size: number;
      readonly scale: readonly [number, number];
      readonly ratio: readonly [number, number];
      readonly flip: boolean;
    }
  /** ImageNet evaluation: the central `fraction` of the image, resized to size x size. */
  | { readonly kind: 'center-crop'; readonly size: number; readonly fraction: number };

/** The generator for one sample of one epoch of one job. */
export function sampleRng(jobSeed: number, epoch: number, id: number): Rng {
  return makeRng(hash32(hash32(hash32(jobSeed) + epoch) + id));
}

/** Output [height, width] of `spec` applied to an image of the given size. */
export function outputSize(spec: AugmentSpec, height: number, width: number): [number, number] {
  switch (spec.kind) {
    case 'none':
    case 'pad-crop-flip':
      return [height, width];
    case 'random-resized-crop':
    case 'center-crop':
      return [spec.size, spec.size];
  }
}

/**
 * The window [top, top+height) x [left, left+width) of `img`, zero outside the image (so a
 * negative top/left is padding), mirrored left-right when `flip`.
 */
export function cropWindow(img: RawImage, top: number, left: number, height: number, width: number, flip: boolean): RawImage {
  const c = img.channels;
  const out = makeImage(height, width, c);
  for (let y = 0; y < height; y++) {
    const sy = top + y;
    if (sy < 0 || sy >= img.height) continue;
    for (let x = 0; x < width; x++) {
      const sx = left + (flip ? width - 1 - x : x);
      if (sx < 0 || sx >= img.width) continue;
      const s = (sy * img.width + sx) * c;
      const d = (y * width + x) * c;
      for (let k = 0; k < c; k++) out.data[d + k] = img.data[s + k];
    }
  }
  return out;
}

/**
 * Bilinear resize of the window (top, left, height, width) of `img` to outH x outW, pixel
 * centres aligned (align_corners = false, edge pixels clamped), mirrored when `flip`.
 */
export function resizeBilinear(
  img: RawImage,
  top: number,
  left: number,
  height: number,
  width: number,
  outH: number,
  outW: number,
  flip = false,
): RawImage {
  const c = img.channels;
  const out = makeImage(outH, outW, c);
  const sy = height / outH;
  const sx = width / outW;
  const clampY = (v: number): number => Math.min(Math.max(v, 0), img.height - 1);
  const clampX = (v: number): number => Math.min(Math.max(v, 0), img.width - 1);
  for (let y = 0; y < outH; y++) {
    const fy = clampY(top + (y + 0.5) * sy - 0.5);
    const y0 = Math.floor(fy);
    const y1 = Math.min(y0 + 1, img.height - 1);
    const wy = fy - y0;
    for (let x = 0; x < outW; x++) {
      const fx = clampX(left + ((flip ? outW - 1 - x : x) + 0.5) * sx - 0.5);
      const x0 = Math.floor(fx);
      const x1 = Math.min(x0 + 1, img.width - 1);
      const wx = fx - x0;
      const d = (y * outW + x) * c;
      for (let k = 0; k < c; k++) {
        const a = img.data[(y0 * img.width + x0) * c + k];
        const b = img.data[(y0 * img.width + x1) * c + k];
        const p = img.data[(y1 * img.width + x0) * c + k];
        const q = img.data[(y1 * img.width + x1) * c + k];
        const v = (1 - wy) * ((1 - wx) * a + wx * b) + wy * ((1 - wx) * p + wx * q);
        out.data[d + k] = Math.round(v);
      }
    }
  }
  return out;
}

export interface CropBox {
  readonly top: number;
  readonly left: number;
  readonly height: number;
  readonly width: number;
}

/** torchvision's RandomResizedCrop box: 10 tries, then the central crop at the clamped ratio. */
export function randomResizedBox(rng: Rng, height: number, width: number, scale: readonly [number, number], ratio: readonly [number, number]): CropBox {
  const area = height * width;
  const logLo = Math.log(ratio[0]);
  const logHi = Math.log(ratio[1]);
  for (let i = 0; i < 10; i++) {
    const target = area * (scale[0] + (scale[1] - scale[0]) * rng.next());
    const aspect = Math.exp(logLo + (logHi - logLo) * rng.next());
    const w = Math.round(Math.sqrt(target * aspect));
    const h = Math.round(Math.sqrt(target / aspect));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      return { top: rng.int(height - h + 1), left: rng.int(width - w + 1), height: h, width: w };
    }
  }
  const r = width / height;
  let w = width;
  let h = height;
  if (r < ratio[0]) h = Math.round(w / ratio[0]);
  else if (r > ratio[1]) w = Math.round(h * ratio[1]);
  return { top: Math.floor((height - h) / 2), left: Math.floor((width - w) / 2), height: h, width: w };
}

/** Applies `spec` to `img`, drawing its random choices from `rng` in a fixed order. */
export function augment(img: RawImage, spec: AugmentSpec, rng: Rng): RawImage {
  switch (spec.kind) {
    case 'none':
      return img;
    case 'pad-crop-flip': {
      const top = rng.int(2 * spec.pad + 1) - spec.pad;
      const left = rng.int(2 * spec.pad + 1) - spec.pad;
      const flip = spec.flip && rng.next() < 0.5;
      return cropWindow(img, top, left, img.height, img.width, flip);
    }
    case 'random-resized-crop': {
      const b = randomResizedBox(rng, img.height, img.width, spec.scale, spec.ratio);
      const flip = spec.flip && rng.next() < 0.5;
      return resizeBilinear(img, b.top, b.left, b.height, b.width, spec.size, spec.size, flip);
    }
    case 'center-crop': {
      const h = img.height * spec.fraction;
      const w = img.width * spec.fraction;
      return resizeBilinear(img, (img.height - h) / 2, (img.width - w) / 2, h, w, spec.size, spec.size);
    }
  }
}

/**
 * Writes `img` as channel planes (C x H x W) of (pixel/255 - mean[c]) / std[c] into `out`
 * starting at `offset` (sample n of an NCHW batch starts at n*C*H*W).
 */
export function normalizeInto(img: RawImage, mean: readonly number[], std: readonly number[], out: Float32Array, offset: number): void {
  const { height: h, width: w, channels: c } = img;
  if (mean.length !== c || std.length !== c) {
    throw new DataError('bad-input', `normalisation has ${mean.length} means and ${std.length} stds for a ${c}-channel image`);
  }
  const plane = h * w;
  for (let k = 0; k < c; k++) {
    const scale = 1 / (255 * std[k]);
    const shift = mean[k] / std[k];
    const base = offset + k * plane;
    for (let i = 0; i < plane; i++) out[base + i] = img.data[i * c + k] * scale - shift;
  }
}
