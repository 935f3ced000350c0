// One stored test image by id, as its file (PNG or JPEG, as the shards hold it), for the
// dashboard's grid of predictions (GET /api/samples/val/<id>). The shards are read from the
// coordinator's own data folder; the last few parsed shards stay in memory (bounded).
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { nodeGunzip } from '../src/data/decode-node.ts';
import { DataError } from '../src/data/errors.ts';
import { makeShardIndex, type Manifest } from '../src/data/manifest.ts';
import { parseShard, type EncodedSample } from '../src/data/shard.ts';

export interface StoredSample { bytes: Uint8Array; label: number; mediaType: 'image/png' | 'image/jpeg' }

/** Parsed val shards kept: the grid's ids sit in the first shard, so one is the usual need. */
const KEEP_SHARDS = 2;

export function valSampleReader(dir: string, manifest: Manifest): (id: number) => Promise<StoredSample> {
  const split = manifest.splits.val;
  const index = makeShardIndex(split);
  const parsed = new Map<number, Promise<EncodedSample[]>>();
  return async (id) => {
    const { shard, index: at } = index.locate(id);
    let samples = parsed.get(shard);
    if (samples) parsed.delete(shard);
    else {
      const file = split.shards[shard]!.file;
      samples = readFile(join(dir, file)).then(
        (b) => parseShard(
          new Uint8Array(b), file, { firstId: index.firstId(shard), samples: split.shards[shard]!.samples, classes: manifest.classes.length }, nodeGunzip,
        ),
        (e: unknown) => { throw new DataError('fetch-failed', `cannot read ${join(dir, file)} (${String(e)})`, { cause: e }); },
      );
      samples.catch(() => parsed.delete(shard));
    }
    parsed.set(shard, samples);
    while (parsed.size > KEEP_SHARDS) parsed.delete(parsed.keys().next().value!);
    const s = (await samples)[at]!;
    return { bytes: s.bytes, label: s.label, mediaType: s.encoding === 'png' ? 'image/png' : 'image/jpeg' };
  };
}
