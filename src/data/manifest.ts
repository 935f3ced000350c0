// The shard manifest (manifest.json beside the shards): what the coordinator serves and
// every peer reads first. Sample ids are global within a split: shard k holds the ids
// [sum of samples of shards 0..k-1, + samples of shard k), in order, keyed sampleKey(id).

import { DataError } from './errors.ts';

export type ImageEncoding = 'png' | 'jpg';
export type SplitName = 'train' | 'val';
export const SPLITS: readonly SplitName[] = ['train', 'val'];

export interface ShardInfo {
  /** File name beside manifest.json (no folders), e.g. "train-000003.tar.gz". */
  readonly file: string;
  readonly samples: number;
  readonly bytes: number;
}

export interface SplitInfo {
  readonly samples: number;
  readonly shards: readonly ShardInfo[];
}

export interface ImageInfo {
  readonly channels: 1 | 3;
  /** Stored size: every image in the shards has exactly this size. */
  readonly height: number;
  readonly width: number;
  readonly encoding: ImageEncoding;
}

export interface Manifest {
  readonly format: 'vt-shards';
  readonly version: 1;
  readonly dataset: string;
  /** Class names; a sample's label is an index into this list. */
  readonly classes: readonly string[];
  readonly image: ImageInfo;
  /** Per-channel mean and standard deviation of pixel/255 over the train split. */
  readonly mean: readonly number[];
  readonly std: readonly number[];
  readonly gzip: boolean;
  readonly splits: Readonly<Record<SplitName, SplitInfo>>;
}

export const MANIFEST_FILE = 'manifest.json';

/** The key of sample `id` inside its shard: `<key>.png` / `<key>.jpg` and `<key>.cls`. */
export function sampleKey(id: number): string {
  return id.toString().padStart(9, '0');
}

export function shardFileName(split: SplitName, index: number, gzip: boolean): string {
  return `${split}-${index.toString().padStart(6, '0')}.tar${gzip ? '.gz' : ''}`;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;
const isPositive = (v: unknown): v is number => isCount(v) && v > 0;
const isFinite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Checks parsed JSON and returns it typed; lists every problem found in one 'bad-manifest' error. */
export function validateManifest(json: unknown, source = MANIFEST_FILE): Manifest {
  const problems: string[] = [];
  const need = (cond: boolean, what: string): boolean => {
    if (!cond) problems.push(what);
    return cond;
  };
  if (!isObj(json)) throw new DataError('bad-manifest', `${source} is not a JSON object`);
  need(json.format === 'vt-shards', `"format" must be "vt-shards" (got ${JSON.stringify(json.format)})`);
  need(json.version === 1, `"version" must be 1 (got ${JSON.stringify(json.version)})`);
  need(typeof json.dataset === 'string' && json.dataset.length > 0, '"dataset" must be a non-empty string');
  const classes = json.classes;
  if (need(Array.isArray(classes) && classes.length > 0, '"classes" must be a non-empty array of names') && Array.isArray(classes)) {
    need(classes.every((c) => typeof c === 'string' && c.length > 0), '"classes" must hold non-empty strings');
    need(new Set(classes).size === classes.length, '"classes" has duplicate names');
  }
  let channels = 0;
  const image = json.image;
  if (need(isObj(image), '"image" must be an object {channels, height, width, encoding}') && isObj(image)) {
    if (need(image.channels === 1 || image.channels === 3, '"image.channels" must be 1 or 3')) channels = image.channels as number;
    need(isPositive(image.height) && isPositive(image.width), '"image.height" and "image.width" must be positive integers');
    need(image.encoding === 'png' || image.encoding === 'jpg', '"image.encoding" must be "png" or "jpg"');
  }
  for (const key of ['mean', 'std'] as const) {
    const v = json[key];
    const ok = Array.isArray(v) && v.every(isFinite) && (channels === 0 || v.length === channels);
    need(ok, `"${key}" must be an array of ${channels || 'image.channels'} finite numbers`);
    if (ok && key === 'std') need(v.every((s) => (s as number) > 0), '"std" values must be > 0');
  }
  need(typeof json.gzip === 'boolean', '"gzip" must be true or false');
  const splits = json.splits;
  if (need(isObj(splits), '"splits" must be an object {train, val}') && isObj(splits)) {
    for (const name of SPLITS) checkSplit(splits[name], name, typeof json.gzip === 'boolean' && json.gzip, need);
  }
  if (problems.length > 0) throw new DataError('bad-manifest', `${source}: ${problems.join('; ')}`);
  return json as unknown as Manifest;
}

function checkSplit(s: unknown, name: string, gzip: boolean, need: (c: boolean, w: string) => boolean): void {
  if (!need(isObj(s), `"splits.${name}" must be an object {samples, shards}`) || !isObj(s)) return;
  const shards = s.shards;
  if (!need(Array.isArray(shards), `"splits.${name}.shards" must be an array`) || !Array.isArray(shards)) return;
  let sum = 0;
  shards.forEach((sh: unknown, i) => {
    const at = `"splits.${name}.shards[${i}]"`;
    if (!need(isObj(sh), `${at} must be an object {file, samples, bytes}`) || !isObj(sh)) return;
    const file = sh.file;
    need(typeof file === 'string' && /^[A-Za-z0-9_.-]+$/.test(file) && !file.startsWith('.'), `${at}.file must be a plain file name (letters, digits, _ . -)`);
    if (typeof file === 'string') {
      need(file.endsWith('.tar.gz') === gzip, `${at}.file "${file}" must ${gzip ? '' : 'not '}end in .tar.gz since "gzip" is ${gzip}`);
    }
    need(isPositive(sh.samples), `${at}.samples must be a positive integer`);
    need(isPositive(sh.bytes), `${at}.bytes must be a positive integer`);
    if (isPositive(sh.samples)) sum += sh.samples;
  });
  need(isCount(s.samples) && s.samples === sum, `"splits.${name}.samples" must equal the sum over its shards (${sum})`);
}

export interface SampleLocation {
  /** Index of the shard in the split's list. */
  readonly shard: number;
  /** Position of the sample inside that shard. */
  readonly index: number;
}

export interface ShardIndex {
  readonly samples: number;
  locate(id: number): SampleLocation;
  /** The global id of the first sample of shard k. */
  firstId(shard: number): number;
  /** The shards holding `ids`, each with the positions in `ids` it serves, in shard order. */
  group(ids: readonly number[]): Map<number, number[]>;
}

/** Random access by global sample id: O(log shards) per lookup. */
export function makeShardIndex(split: SplitInfo): ShardIndex {
  const starts = new Array<number>(split.shards.length + 1);
  starts[0] = 0;
  split.shards.forEach((s, i) => (starts[i + 1] = starts[i] + s.samples));
  const samples = starts[split.shards.length];
  const locate = (id: number): SampleLocation => {
    if (!Number.isInteger(id) || id < 0 || id >= samples) {
      throw new DataError('bad-input', `sample id ${id} is outside this split (0..${samples - 1})`);
    }
    let lo = 0;
    let hi = split.shards.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= id) lo = mid;
      else hi = mid - 1;
    }
    return { shard: lo, index: id - starts[lo] };
  };
  const group = (ids: readonly number[]): Map<number, number[]> => {
    const byShard = new Map<number, number[]>();
    ids.forEach((id, pos) => {
      const { shard } = locate(id);
      const list = byShard.get(shard);
      if (list) list.push(pos);
      else byShard.set(shard, [pos]);
    });
    return new Map([...byShard].sort((a, b) => a[0] - b[0]));
  };
  const firstId = (shard: number): number => {
    if (!(shard >= 0 && shard < split.shards.length)) throw new DataError('bad-input', `no shard ${shard} in this split (${split.shards.length} shards)`);
    return starts[shard];
  };
  return { samples, locate, firstId, group };
}
