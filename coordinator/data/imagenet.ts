// An ImageNet-layout folder: train/<wnid>/*.JPEG and (optionally) val/<wnid>/*.JPEG. Images
// are resized (shorter side to `size`, centre crop) to size x size RGB JPEGs with sharp;
// a JPEG already at that size is copied as it is. Train order is shuffled once with a fixed
// seed so every shard holds a mix of classes.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { DataError } from '../../src/data/errors.ts';
import { makeImage, type RawImage } from '../../src/data/image.ts';
import type { SplitName } from '../../src/data/manifest.ts';
import { makeRng } from '../../src/rng.ts';
import { exists } from './files.ts';
import type { DatasetSource, SourceItem } from './source.ts';

const IMAGE_FILE = /\.(jpe?g|png)$/i;
const SPLIT_DIR: Record<SplitName, string> = { train: 'train', val: 'val' };

interface FileItem {
  readonly path: string;
  readonly label: number;
}

async function listClassDirs(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
}

async function listSplit(root: string, split: SplitName, classes: readonly string[]): Promise<FileItem[]> {
  const dir = join(root, SPLIT_DIR[split]);
  if (!(await exists(dir))) return [];
  const items: FileItem[] = [];
  for (const wnid of await listClassDirs(dir)) {
    const label = classes.indexOf(wnid);
    if (label < 0) throw new DataError('source-missing', `${join(dir, wnid)} is a class that train/ does not have`);
    const files = (await readdir(join(dir, wnid))).filter((f) => IMAGE_FILE.test(f)).sort();
    for (const f of files) items.push({ path: join(dir, wnid, f), label });
  }
  return items;
}

function shuffle<T>(a: T[], seed: number): T[] {
  const rng = makeRng(seed);
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

/** size x size RGB pixels and JPEG bytes of one source image. */
export async function resizeForShard(bytes: Uint8Array, size: number, quality = 90): Promise<{ raw: RawImage; bytes: Uint8Array }> {
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

export async function imagenetSource(root: string, size: number, limit = Infinity, concurrency = 4): Promise<DatasetSource> {
  const trainDir = join(root, SPLIT_DIR.train);
  if (!(await exists(trainDir))) throw new DataError('source-missing', `${trainDir} does not exist`);
  const classes = await listClassDirs(trainDir);
  if (classes.length === 0) throw new DataError('source-missing', `${trainDir} has no class folders`);
  const files = {
    train: shuffle(await listSplit(root, 'train', classes), 0x1ab).slice(0, limit),
    val: (await listSplit(root, 'val', classes)).slice(0, limit),
  };
  if (files.train.length === 0) throw new DataError('source-missing', `${trainDir} has no .JPEG files`);
  const load = async (f: FileItem): Promise<SourceItem> => {
    try {
      return { ...(await resizeForShard(new Uint8Array(await readFile(f.path)), size)), label: f.label };
    } catch (e) {
      if (e instanceof DataError) throw e;
      throw new DataError('decode-failed', `${f.path} could not be read or resized (${String(e)})`, { cause: e });
    }
  };
  return {
    dataset: 'imagenet',
    classes,
    image: { channels: 3, height: size, width: size, encoding: 'jpg' },
    count: (split) => files[split].length,
    async *items(split) {
      const list = files[split];
      // A few images in flight at once, handed out in order.
      for (let i = 0; i < list.length; i += concurrency) yield* await Promise.all(list.slice(i, i + concurrency).map(load));
    },
  };
}
