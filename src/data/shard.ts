// WebDataset-style shards: adjacent tar entries sharing a key (the name up to the first dot
// of its last path part) form a sample: `<key>.png` or `<key>.jpg` plus `<key>.cls` (the
// class index in ASCII). Packing is pure; reading streams (gunzip on the way when asked).

import { chunksOf, gunzip, isGzip, maybeGunzipStream, type Gunzip } from './bytes.ts';
import { DataError } from './errors.ts';
import { sampleKey, type ImageEncoding } from './manifest.ts';
import { packTar, readTar, TarParser, type TarEntry } from './tar.ts';

export interface EncodedSample {
  readonly key: string;
  readonly encoding: ImageEncoding;
  /** The encoded image file (PNG or JPEG bytes). */
  readonly bytes: Uint8Array;
  readonly label: number;
}

/** What a reader can check a shard against (from the manifest). */
export interface ShardExpect {
  /** The global id of the first sample: keys must run firstId, firstId+1, ... */
  readonly firstId?: number;
  readonly samples?: number;
  readonly classes?: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** One tar holding the samples in order (`<key>.<encoding>` then `<key>.cls`). */
export function packShard(samples: readonly EncodedSample[]): Uint8Array {
  const entries: TarEntry[] = [];
  for (const s of samples) {
    entries.push({ name: `${s.key}.${s.encoding}`, data: s.bytes });
    entries.push({ name: `${s.key}.cls`, data: enc.encode(String(s.label)) });
  }
  return packTar(entries);
}

function splitKey(name: string): [key: string, ext: string] {
  const slash = name.lastIndexOf('/');
  const dot = name.indexOf('.', slash + 1);
  return dot < 0 ? [name, ''] : [name.slice(0, dot), name.slice(dot + 1).toLowerCase()];
}

/** Folds tar entries into samples, checking them against `expect`. */
class SampleGrouper {
  private key: string | null = null;
  private image: { encoding: ImageEncoding; bytes: Uint8Array } | null = null;
  private label: number | null = null;
  private count = 0;

  constructor(
    private readonly source: string,
    private readonly expect: ShardExpect,
  ) {}

  add(e: TarEntry): EncodedSample | null {
    const [key, ext] = splitKey(e.name);
    const done = this.key !== null && key !== this.key ? this.flush() : null;
    this.key = key;
    if (ext === 'png' || ext === 'jpg' || ext === 'jpeg') {
      this.image = { encoding: ext === 'png' ? 'png' : 'jpg', bytes: e.data };
    } else if (ext === 'cls') {
      const text = dec.decode(e.data).trim();
      const label = /^\d+$/.test(text) ? Number(text) : Number.NaN;
      const classes = this.expect.classes ?? Infinity;
      if (!(label < classes)) this.fail(`"${e.name}" holds "${text.slice(0, 20)}", not a class index below ${classes}`);
      this.label = label;
    }
    // other members (.json, .txt) are allowed and ignored
    return done;
  }

  flush(): EncodedSample | null {
    if (this.key === null) return null;
    const key = this.key;
    if (!this.image) this.fail(`sample "${key}" has no .png or .jpg`);
    if (this.label === null) this.fail(`sample "${key}" has no .cls`);
    const first = this.expect.firstId;
    if (first !== undefined && key !== sampleKey(first + this.count)) {
      this.fail(`sample ${this.count} has key "${key}", expected "${sampleKey(first + this.count)}"`);
    }
    const s: EncodedSample = { key, encoding: this.image.encoding, bytes: this.image.bytes, label: this.label };
    this.key = null;
    this.image = null;
    this.label = null;
    this.count++;
    return s;
  }

  finish(): void {
    const want = this.expect.samples;
    if (want !== undefined && this.count !== want) this.fail(`holds ${this.count} samples, the manifest says ${want}`);
  }

  private fail(detail: string): never {
    throw new DataError('bad-shard', `${this.source}: ${detail}`);
  }
}

/** All samples of a shard held in memory (gzipped or not: detected by its magic). */
export async function parseShard(bytes: Uint8Array, source = 'shard', expect: ShardExpect = {}, unzip: Gunzip = gunzip): Promise<EncodedSample[]> {
  const tar = isGzip(bytes) ? await gunzipOrFail(bytes, source, unzip) : bytes;
  const g = new SampleGrouper(source, expect);
  const out: EncodedSample[] = [];
  for (const e of readTar(tar, source)) {
    const s = g.add(e);
    if (s) out.push(s);
  }
  const last = g.flush();
  if (last) out.push(last);
  g.finish();
  return out;
}

async function gunzipOrFail(bytes: Uint8Array, source: string, unzip: Gunzip): Promise<Uint8Array> {
  try {
    return await unzip(bytes);
  } catch (e) {
    throw new DataError('bad-tar', `${source}: gzip stream is corrupt or truncated (${String(e)})`, { cause: e });
  }
}

/** Samples of a shard as its bytes arrive (e.g. a fetch body); `gzip` from the manifest. */
export async function* streamShard(
  stream: ReadableStream<Uint8Array<ArrayBuffer>>,
  gzip: boolean,
  source = 'shard',
  expect: ShardExpect = {},
): AsyncGenerator<EncodedSample> {
  const parser = new TarParser(source);
  const g = new SampleGrouper(source, expect);
  for await (const chunk of chunksOf(maybeGunzipStream(stream, gzip))) {
    for (const e of parser.push(chunk)) {
      const s = g.add(e);
      if (s) yield s;
    }
  }
  parser.finish();
  const last = g.flush();
  if (last) yield last;
  g.finish();
}
