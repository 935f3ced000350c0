// An ImageNet folder as a DatasetSource: the layouts of imagenet-layout.ts, each image made a
// size x size RGB JPEG by imagenet-image.ts (bad files converted or skipped, never fatal).
// Train order is a seeded shuffle (TRAIN_SHUFFLE_SEED) of the path-sorted file list, so every
// shard holds a mix of classes and every run, resumed or not, sees the same order; val keeps
// the sorted order. A split can be read from any position (a resumed build starts there).

import { readFile } from 'node:fs/promises';
import sharp from 'sharp';
import { DataError } from '../../src/data/errors.ts';
import { makeImage, type RawImage } from '../../src/data/image.ts';
import type { SplitName } from '../../src/data/manifest.ts';
import { makeRng } from '../../src/rng.ts';
import type { BuildKey } from './build-report.ts';
import { DEFAULT_MAX_PIXELS, prepareImage } from './imagenet-image.ts';
import { listImagenet, type ImagenetListing, type LabeledFile } from './imagenet-layout.ts';
import { isSkipped, type DatasetSource, type SourceEntry, type SourceItem } from './source.ts';

export const TRAIN_SHUFFLE_SEED = 0x1ab;
/** Bumped when the bytes a build writes change for the same source and options. */
const BUILDER_VERSION = 2;
const JPEG_QUALITY = 90;

export interface ImagenetOptions {
  /** Images above this many pixels are skipped undecoded (default: Pillow's 89.5 M). */
  readonly maxPixels?: number;
}

/** The options an ImageNet build's bytes depend on (with samplesPerShard and gzip, added by the builder). */
export function imagenetKey(size: number, limit: number | undefined, o: ImagenetOptions = {}): BuildKey {
  const lim = limit === undefined || limit === Infinity ? null : limit;
  return { builder: BUILDER_VERSION, size, limit: lim, quality: JPEG_QUALITY, maxPixels: o.maxPixels ?? DEFAULT_MAX_PIXELS };
}

function shuffle<T>(a: T[], seed: number): T[] {
  const rng = makeRng(seed);
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

/** size x size RGB pixels and JPEG bytes of one source image (throws on a bad one: see prepareImage). */
export async function resizeForShard(bytes: Uint8Array, size: number, quality = JPEG_QUALITY): Promise<{ raw: RawImage; bytes: Uint8Array }> {
  const meta = await sharp(bytes).metadata();
  const { data } = await sharp(bytes)
    .rotate()
    .resize(size, size, { fit: 'cover', position: 'centre' })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  const raw = makeImage(size, size, 3, new Uint8Array(data.buffer, data.byteOffset, data.length));
  if (meta.format === 'jpeg' && meta.width === size && meta.height === size && (meta.orientation ?? 1) === 1) return { raw, bytes };
  const jpeg = await sharp(raw.data, { raw: { width: size, height: size, channels: 3 } }).jpeg({ quality }).toBuffer();
  return { raw, bytes: new Uint8Array(jpeg.buffer, jpeg.byteOffset, jpeg.length) };
}

/** Errors reading a listed file that mean "this file", not "this disk": the file is skipped. */
const FILE_LEVEL = new Set(['ENOENT', 'EACCES', 'EPERM', 'EISDIR']);

async function loadEntry(f: LabeledFile, size: number, o: ImagenetOptions): Promise<SourceEntry> {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await readFile(f.path));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (!FILE_LEVEL.has(code)) throw new DataError('source-missing', `reading ${f.path} failed (${String(e)}): is the disk still there?`, { cause: e });
    return { skipped: { path: f.path, action: 'skipped', reason: `cannot be read (${code})` } };
  }
  const p = await prepareImage(bytes, f.path, { size, quality: JPEG_QUALITY, maxPixels: o.maxPixels });
  if (!p.ok) return { skipped: { path: f.path, action: 'skipped', reason: p.reason } };
  const item: SourceItem = { raw: p.raw, bytes: p.bytes, label: f.label };
  return p.converted ? { ...item, note: { path: f.path, action: 'converted', reason: p.converted } } : item;
}

/** Up to `width` loads in flight, results handed out in list order. */
async function* inOrder<T, R>(list: readonly T[], width: number, load: (t: T) => Promise<R>): AsyncGenerator<R> {
  const inFlight: Promise<R>[] = [];
  let next = 0;
  try {
    while (next < list.length || inFlight.length > 0) {
      while (next < list.length && inFlight.length < width) inFlight.push(load(list[next++]));
      const first = inFlight.shift();
      if (first) yield await first;
    }
  } finally {
    // The reader stopped early (an error, an interrupted build): loads still in flight have no
    // reader any more; their failure must not surface as an unhandled rejection.
    for (const p of inFlight) p.catch(() => undefined);
  }
}

export interface ImagenetSource extends DatasetSource {
  readonly fingerprint: string;
  readonly files: Readonly<Record<SplitName, readonly LabeledFile[]>>;
  readonly layoutInfo: ImagenetListing;
}

export async function imagenetSource(root: string, size: number, limit = Infinity, concurrency = 4, o: ImagenetOptions = {}): Promise<ImagenetSource> {
  const listing = await listImagenet(root);
  const files = {
    train: shuffle([...listing.train], TRAIN_SHUFFLE_SEED).slice(0, limit),
    val: listing.val.slice(0, limit),
  };
  const entries = (split: SplitName, start: number): AsyncIterable<SourceEntry> =>
    inOrder(files[split].slice(start), concurrency, (f) => loadEntry(f, size, o));
  return {
    dataset: 'imagenet',
    classes: listing.classes,
    image: { channels: 3, height: size, width: size, encoding: 'jpg' },
    fingerprint: listing.fingerprint,
    listing: { layout: listing.layout, notes: listing.notes, skipped: listing.skipped },
    files,
    layoutInfo: listing,
    count: (split) => files[split].length,
    entries,
    async *items(split) {
      for await (const e of entries(split, 0)) if (!isSkipped(e)) yield e;
    },
  };
}
