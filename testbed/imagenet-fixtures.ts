// Small ImageNet-layout folders of real JPEGs (written with sharp) for tests and benches.
// Class k's images are its own colour (hue k/classes) with stripes whose angle and period
// depend on k, plus seeded noise, at random sizes: a small CNN can learn them, and a test can
// tell a sample's class from its pixels (classPixel). Val comes in the usual layouts, and bad
// files of each kind can be added, with the action the builder should take on each.

import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import type { Manifest, SplitName } from '../src/data/manifest.ts';
import { parseShard, type EncodedSample } from '../src/data/shard.ts';
import { makeRng, type Rng } from '../src/rng.ts';

/** 'folders': val/<wnid>/; 'kaggle': flat val/ + LOC_val_solution.csv; 'tiny': Tiny-ImageNet's val/images/ + val_annotations.txt. */
export type FixtureValLayout = 'folders' | 'kaggle' | 'tiny' | 'none';

export type BadKind = 'empty' | 'garbage' | 'truncated' | 'cmyk' | 'grey' | 'png' | 'huge' | 'unknown-val-class';

/** What the builder should do with each bad kind. */
export const BAD_ACTION: Record<BadKind, 'converted' | 'skipped'> = {
  empty: 'skipped',
  garbage: 'skipped',
  truncated: 'skipped',
  cmyk: 'converted',
  grey: 'converted',
  png: 'converted',
  huge: 'skipped',
  'unknown-val-class': 'skipped',
};

export interface ImagenetFolderOptions {
  readonly classes: number;
  readonly trainPerClass: number;
  readonly valPerClass: number;
  readonly valLayout: FixtureValLayout;
  /** Smallest and largest side in pixels: each image's width and height are drawn from this range. */
  readonly sizes: readonly [number, number];
  readonly seed: number;
  /** Bad files to add (train/ of the first class; 'unknown-val-class' goes to val). */
  readonly bad?: readonly BadKind[];
  /** Tiny-ImageNet's train/<wnid>/images/ (default: when valLayout is 'tiny'). */
  readonly tinyTrain?: boolean;
  /** The last n classes get no val images. */
  readonly classesWithoutVal?: number;
  /** Where LOC_val_solution.csv goes for 'kaggle' (default the root). */
  readonly csvIn?: 'root' | 'val';
}

export interface ImagenetFolder {
  readonly root: string;
  readonly wnids: readonly string[];
  /** Samples a build should produce (good images plus converted bad ones). */
  readonly trainSamples: number;
  readonly valSamples: number;
  readonly bad: readonly { readonly kind: BadKind; readonly path: string; readonly action: 'converted' | 'skipped' }[];
}

export const fixtureWnid = (k: number): string => `n${String(1440764 + 1117 * k).padStart(8, '0')}`;
const UNKNOWN_WNID = 'n09999999';

function hsv(h: number): [number, number, number] {
  const f = (n: number): number => {
    const k = (n + h * 6) % 6;
    return 255 * (1 - 0.8 * Math.max(0, Math.min(k, 4 - k, 1)));
  };
  return [f(5), f(3), f(1)];
}

/** The noiseless value of class k's image at (x, y), channel c. */
export function classPixel(k: number, classes: number, x: number, y: number, c: number): number {
  const colour = hsv(k / classes)[c];
  const angle = ((k % 4) * Math.PI) / 4;
  const period = 4 + 2 * (Math.floor(k / 4) % 4);
  const stripe = Math.sin(((x * Math.cos(angle) + y * Math.sin(angle)) * 2 * Math.PI) / period) > 0 ? 40 : -40;
  return colour + stripe;
}

function classImage(k: number, classes: number, w: number, h: number, rng: Rng): Uint8Array {
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      for (let c = 0; c < 3; c++) data[(y * w + x) * 3 + c] = Math.max(0, Math.min(255, Math.round(classPixel(k, classes, x, y, c) + (rng.next() - 0.5) * 40)));
    }
  }
  return data;
}

async function classJpeg(k: number, o: ImagenetFolderOptions, rng: Rng): Promise<Buffer> {
  const [lo, hi] = o.sizes;
  const w = lo + rng.int(hi - lo + 1);
  const h = lo + rng.int(hi - lo + 1);
  return sharp(classImage(k, o.classes, w, h, rng), { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}

/** A JPEG whose frame header claims 60000 x 60000 pixels (a decompression bomb's header). */
function hugeHeader(jpeg: Buffer): Buffer {
  const b = Buffer.from(jpeg);
  for (let i = 0; i + 8 < b.length; i++) {
    if (b[i] === 0xff && (b[i + 1] === 0xc0 || b[i + 1] === 0xc2)) {
      b.writeUInt16BE(60000, i + 5);
      b.writeUInt16BE(60000, i + 7);
      return b;
    }
  }
  throw new Error('no SOF marker in the JPEG');
}

async function badFile(kind: Exclude<BadKind, 'unknown-val-class'>, o: ImagenetFolderOptions, rng: Rng): Promise<Buffer> {
  const raw = classImage(0, o.classes, 60, 50, rng);
  const img = () => sharp(raw, { raw: { width: 60, height: 50, channels: 3 } });
  switch (kind) {
    case 'empty':
      return Buffer.alloc(0);
    case 'garbage':
      return Buffer.from(Array.from({ length: 3000 }, () => rng.int(256)));
    case 'truncated': {
      const full = await img().jpeg({ quality: 95 }).toBuffer();
      return full.subarray(0, Math.floor(full.length * 0.6));
    }
    case 'cmyk':
      return img().toColourspace('cmyk').jpeg().toBuffer();
    case 'grey':
      return img().toColourspace('b-w').jpeg().toBuffer();
    case 'png':
      return img().png().toBuffer();
    case 'huge':
      return hugeHeader(await img().jpeg().toBuffer());
  }
}

/** Writes an ImageNet-layout folder into `dir` (created). */
export async function makeImagenetFolder(dir: string, o: ImagenetFolderOptions): Promise<ImagenetFolder> {
  const rng = makeRng(o.seed);
  const wnids = Array.from({ length: o.classes }, (_, k) => fixtureWnid(k));
  const tinyTrain = o.tinyTrain ?? o.valLayout === 'tiny';
  const bad: { kind: BadKind; path: string; action: 'converted' | 'skipped' }[] = [];
  for (const [k, wnid] of wnids.entries()) {
    const classDir = tinyTrain ? join(dir, 'train', wnid, 'images') : join(dir, 'train', wnid);
    await mkdir(classDir, { recursive: true });
    for (let i = 0; i < o.trainPerClass; i++) await writeFile(join(classDir, `${wnid}_${i}.JPEG`), await classJpeg(k, o, rng));
    if (tinyTrain) await writeFile(join(dir, 'train', wnid, `${wnid}_boxes.txt`), '');
  }
  const firstClassDir = tinyTrain ? join(dir, 'train', wnids[0], 'images') : join(dir, 'train', wnids[0]);
  for (const kind of o.bad ?? []) {
    if (kind === 'unknown-val-class') continue;
    const path = join(firstClassDir, `bad_${kind}.JPEG`);
    await writeFile(path, await badFile(kind, o, rng));
    bad.push({ kind, path, action: BAD_ACTION[kind] });
  }
  // Val: image i of class k is the same pixels whatever the layout.
  const withVal = o.classes - (o.classesWithoutVal ?? 0);
  const val: { k: number; i: number; wnid: string; bytes: Buffer }[] = [];
  for (let k = 0; k < withVal; k++) for (let i = 0; i < o.valPerClass; i++) val.push({ k, i, wnid: wnids[k], bytes: await classJpeg(k, o, rng) });
  if ((o.bad ?? []).includes('unknown-val-class')) val.push({ k: -1, i: 0, wnid: UNKNOWN_WNID, bytes: await classJpeg(0, o, rng) });
  const good = val.filter((v) => v.k >= 0).length;
  await writeVal(dir, o, val, bad);
  const converted = bad.filter((b) => b.action === 'converted').length;
  return { root: dir, wnids, trainSamples: o.classes * o.trainPerClass + converted, valSamples: o.valLayout === 'none' ? 0 : good, bad };
}

type ValImage = { k: number; i: number; wnid: string; bytes: Buffer };

async function writeVal(
  dir: string, o: ImagenetFolderOptions, val: readonly ValImage[], bad: { kind: BadKind; path: string; action: 'converted' | 'skipped' }[],
): Promise<void> {
  const valDir = join(dir, 'val');
  const unknown = (path: string, v: ValImage): void => {
    if (v.k < 0) bad.push({ kind: 'unknown-val-class', path, action: 'skipped' });
  };
  if (o.valLayout === 'none') return;
  if (o.valLayout === 'folders') {
    for (const v of val) {
      await mkdir(join(valDir, v.wnid), { recursive: true });
      const path = join(valDir, v.wnid, `${v.wnid}_val_${v.i}.JPEG`);
      await writeFile(path, v.bytes);
      unknown(path, v);
    }
    return;
  }
  const images = o.valLayout === 'tiny' ? join(valDir, 'images') : valDir;
  await mkdir(images, { recursive: true });
  const lines: string[] = [];
  for (const [n, v] of val.entries()) {
    const name = o.valLayout === 'tiny' ? `val_${n}.JPEG` : `ILSVRC2012_val_${String(n + 1).padStart(8, '0')}.JPEG`;
    await writeFile(join(images, name), v.bytes);
    unknown(join(images, name), v);
    lines.push(o.valLayout === 'tiny' ? `${name}\t${v.wnid}\t0\t0\t10\t10` : `${name.replace('.JPEG', '')},${v.wnid} 1 2 30 40 ${v.wnid} 5 6 20 20 `);
  }
  if (o.valLayout === 'tiny') await writeFile(join(valDir, 'val_annotations.txt'), `${lines.join('\n')}\n`);
  else await writeFile(join(o.csvIn === 'val' ? valDir : dir, 'LOC_val_solution.csv'), `ImageId,PredictionString\n${lines.join('\n')}\n`);
}

/** Every sample of a built split, read back from its shards in order. */
export async function readSplit(dir: string, m: Manifest, split: SplitName): Promise<EncodedSample[]> {
  const out: EncodedSample[] = [];
  for (const s of m.splits[split].shards) out.push(...(await parseShard(new Uint8Array(await readFile(join(dir, s.file))), s.file)));
  return out;
}

/** The class whose colour is nearest the image's mean colour (the stripes average out). */
export async function classOf(jpeg: Uint8Array, classes: number): Promise<number> {
  const { data, info } = await sharp(jpeg).raw().toBuffer({ resolveWithObject: true });
  const mean = [0, 1, 2].map((c) => data.reduce((a, v, i) => (i % info.channels === c ? a + v : a), 0) / (info.width * info.height));
  const dist = (k: number): number => [0, 1, 2].reduce(
    (a, c) => a + (mean[c] - (classPixel(k, classes, 0, 0, c) + classPixel(k, classes, 1, 0, c)) / 2) ** 2, 0,
  );
  let best = 0;
  for (let k = 1; k < classes; k++) if (dist(k) < dist(best)) best = k;
  return best;
}
