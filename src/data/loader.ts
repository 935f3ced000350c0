// BatchLoader: sample ids in, one normalised NCHW Float32Array batch and Int32Array labels
// out, in the order of the ids. Owns a cache of parsed shards (bounded in bytes, least
// recently used first out); decoding runs a few images at a time.

import type { Gunzip } from './bytes.ts';
import { augment, normalizeInto, outputSize, sampleRng, type AugmentSpec } from './augment.ts';
import { checkSize, type Decoder, type RawImage } from './image.ts';
import { makeShardIndex, type Manifest, type ShardIndex, type SplitName } from './manifest.ts';
import { parseShard, type EncodedSample } from './shard.ts';
import type { ShardSource } from './source.ts';

export interface Batch {
  /** N x C x H x W, normalised with the manifest's mean/std. */
  readonly x: Float32Array;
  readonly labels: Int32Array;
  readonly shape: readonly [n: number, c: number, h: number, w: number];
}

/** Bytes of parsed shards a BatchLoader keeps by default: all of CIFAR-10 or MNIST. */
export const DEFAULT_CACHE_BYTES = 512 * 2 ** 20;
/** warmAll loads a split whose shard files take at most this fraction of the cache budget. */
export const WARM_FRACTION = 1 / 16;

export interface BatchLoaderOptions {
  readonly manifest: Manifest;
  readonly source: ShardSource;
  readonly decoder: Decoder;
  readonly split: SplitName;
  readonly augment: AugmentSpec;
  /** The job seed; with the epoch and the sample id it seeds each sample's augmentation. */
  readonly seed: number;
  /**
   * Bytes of parsed shards kept in memory (default 512 MiB: all of CIFAR-10 or MNIST, whose
   * steps draw ids from every shard). Least recently used shards go first; a data set larger
   * than this (ImageNet) is fetched again as its steps come back to a shard (a disk or
   * IndexedDB cache below the source makes that cheap). Shards still loading are not counted.
   */
  readonly cacheBytes?: number;
  /** Images decoded at once (default 16). */
  readonly concurrency?: number;
  /** Gunzip for whole shards (default DecompressionStream; Node: nodeGunzip). */
  readonly gunzip?: Gunzip;
}

/** The augmentation a job uses by default for a data set and split. */
export function defaultAugment(manifest: Manifest, split: SplitName): AugmentSpec {
  const size = Math.min(manifest.image.height, manifest.image.width);
  if (manifest.image.encoding === 'jpg') {
    return split === 'train'
      ? { kind: 'random-resized-crop', size, scale: [0.08, 1], ratio: [3 / 4, 4 / 3], flip: true }
      : { kind: 'none' };
  }
  if (split === 'val') return { kind: 'none' };
  return manifest.dataset === 'mnist' ? { kind: 'pad-crop-flip', pad: 2, flip: false } : { kind: 'pad-crop-flip', pad: 4, flip: true };
}

export class BatchLoader {
  readonly index: ShardIndex;
  /** Shard index -> its parse (bytes = 0 until it resolves). Map order is recency order. */
  private readonly shards = new Map<number, { samples: Promise<EncodedSample[]>; bytes: number }>();
  private readonly opts: BatchLoaderOptions;

  constructor(opts: BatchLoaderOptions) {
    if (opts.cacheBytes !== undefined && !(opts.cacheBytes > 0)) throw new RangeError(`BatchLoader cacheBytes must be > 0, got ${opts.cacheBytes}`);
    this.opts = opts;
    this.index = makeShardIndex(opts.manifest.splits[opts.split]);
  }

  /** Shape of a batch of n samples. */
  shape(n: number): [number, number, number, number] {
    const { image } = this.opts.manifest;
    const [h, w] = outputSize(this.opts.augment, image.height, image.width);
    return [n, image.channels, h, w];
  }

  /** The batch for `ids` (sample ids of the split) in epoch `epoch`. */
  async load(ids: readonly number[], epoch: number): Promise<Batch> {
    const { manifest, augment: spec, seed } = this.opts;
    const shape = this.shape(ids.length);
    const per = shape[1] * shape[2] * shape[3];
    const x = new Float32Array(ids.length * per);
    const labels = new Int32Array(ids.length);
    await this.forEachSample(ids, (pos, img, label) => {
      const out = augment(img, spec, sampleRng(seed, epoch, ids[pos]));
      normalizeInto(out, manifest.mean, manifest.std, x, pos * per);
      labels[pos] = label;
    });
    return { x, labels, shape };
  }

  /** Decoded samples without augmentation, in the order of `ids`. */
  async samples(ids: readonly number[]): Promise<{ image: RawImage; label: number }[]> {
    const out = new Array<{ image: RawImage; label: number }>(ids.length);
    await this.forEachSample(ids, (pos, image, label) => (out[pos] = { image, label }));
    return out;
  }

  private async forEachSample(ids: readonly number[], use: (pos: number, img: RawImage, label: number) => void): Promise<void> {
    const { image } = this.opts.manifest;
    const jobs: (() => Promise<void>)[] = [];
    const groups = [...this.index.group(ids)];
    const parsed = await Promise.all(groups.map(([k]) => this.shard(k)));
    for (const [g, [, positions]] of groups.entries()) {
      const samples = parsed[g];
      for (const pos of positions) {
        const s = samples[this.index.locate(ids[pos]).index];
        jobs.push(async () => {
          const img = await this.opts.decoder.decode(s.bytes, s.encoding, image.channels);
          use(pos, checkSize(img, image.height, image.width, `sample ${ids[pos]}`), s.label);
        });
      }
    }
    await runLimited(jobs, this.opts.concurrency ?? 16);
  }

  /** Parsed samples of shard k of the split (fetched once while cached). */
  private shard(k: number): Promise<EncodedSample[]> {
    const hit = this.shards.get(k);
    if (hit) {
      this.shards.delete(k); // re-insert as the most recent
      this.shards.set(k, hit);
      return hit.samples;
    }
    const { manifest, split, source } = this.opts;
    const info = manifest.splits[split].shards[k];
    const expect = { firstId: this.index.firstId(k), samples: info.samples, classes: manifest.classes.length };
    const entry = { samples: source.read(info.file).then((b) => parseShard(b, `${source.origin}${info.file}`, expect, this.opts.gunzip)), bytes: 0 };
    this.shards.set(k, entry);
    entry.samples.then(
      (samples) => {
        // Samples are views into the decompressed tar: count the buffers they keep alive.
        const buffers = new Set(samples.map((s) => s.bytes.buffer));
        entry.bytes = [...buffers].reduce((n, b) => n + b.byteLength, 0);
        this.evict();
      },
      // A failed fetch must not stay cached; the caller sees the rejection through entry.samples.
      () => {
        if (this.shards.get(k) === entry) this.shards.delete(k);
      },
    );
    return entry.samples;
  }

  /**
   * Starts fetching every shard of the split when the whole split surely fits the cache: its
   * files (compressed) take at most WARM_FRACTION of the budget, room for their parse at any
   * sensible compression. A small data set (a class demo, the churn bench) is then on hand
   * before the first step: a joiner fetched 200-300 KB of shards in its first step, and the
   * ring waited 85-170 ms for it. Returns how many shards it started (0: too large, or already
   * cached). A failed fetch is forgotten: the step that needs the shard fetches it again.
   */
  warmAll(): number {
    const shards = this.opts.manifest.splits[this.opts.split].shards;
    const total = shards.reduce((n, s) => n + s.bytes, 0);
    if (total > WARM_FRACTION * (this.opts.cacheBytes ?? DEFAULT_CACHE_BYTES)) return 0;
    let started = 0;
    shards.forEach((_, k) => {
      if (this.shards.has(k)) return;
      started++;
      this.shard(k).catch(() => undefined);
    });
    return started;
  }

  /** Parsed bytes held now (shards still loading count 0). */
  get cachedBytes(): number {
    let total = 0;
    for (const e of this.shards.values()) total += e.bytes;
    return total;
  }

  /** Drops least recently used parsed shards past the budget; the newest always stays. */
  private evict(): void {
    const budget = this.opts.cacheBytes ?? DEFAULT_CACHE_BYTES;
    let total = this.cachedBytes;
    let parsed = 0;
    for (const e of this.shards.values()) if (e.bytes > 0) parsed++;
    for (const [k, e] of this.shards) {
      if (total <= budget || parsed <= 1) break;
      // A shard still loading holds nothing yet, and a batch is waiting for it: keep it.
      if (e.bytes === 0) continue;
      total -= e.bytes;
      parsed--;
      this.shards.delete(k);
    }
  }
}

async function runLimited(jobs: readonly (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) await jobs[next++]();
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
}

