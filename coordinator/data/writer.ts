// Writes one split's samples into shards of `samplesPerShard` (atomically and fsync'd,
// gzipped when asked), keys sampleKey(0), sampleKey(1), ... in the order samples arrive. A
// resumed build starts the writer after the shards it already has.

import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { sampleKey, shardFileName, type ImageEncoding, type ShardInfo, type SplitInfo, type SplitName } from '../../src/data/manifest.ts';
import { packShard, type EncodedSample } from '../../src/data/shard.ts';
import { writeFileAtomic } from './files.ts';

export class SplitWriter {
  private pending: EncodedSample[] = [];
  private readonly shards: ShardInfo[];
  private next: number;

  constructor(
    private readonly dir: string,
    private readonly split: SplitName,
    private readonly encoding: ImageEncoding,
    private readonly samplesPerShard: number,
    private readonly gzip: boolean,
    /** Shards already written (a resumed build): keys continue after them. */
    done: readonly ShardInfo[] = [],
  ) {
    this.shards = [...done];
    this.next = done.reduce((n, s) => n + s.samples, 0);
  }

  /** Adds a sample; returns the shard it completed, if it completed one. */
  async add(bytes: Uint8Array, label: number): Promise<ShardInfo | null> {
    this.pending.push({ key: sampleKey(this.next++), encoding: this.encoding, bytes, label });
    return this.pending.length >= this.samplesPerShard ? this.flush() : null;
  }

  /** Writes the last, partly filled shard (returned, or null when there is none). */
  async close(): Promise<ShardInfo | null> {
    return this.flush();
  }

  info(): SplitInfo {
    return { samples: this.next, shards: [...this.shards] };
  }

  async finish(): Promise<SplitInfo> {
    await this.flush();
    return this.info();
  }

  private async flush(): Promise<ShardInfo | null> {
    if (this.pending.length === 0) return null;
    const tar = packShard(this.pending);
    const data = this.gzip ? gzipSync(tar, { level: 6 }) : tar;
    const file = shardFileName(this.split, this.shards.length, this.gzip);
    await writeFileAtomic(join(this.dir, file), data, true);
    const shard: ShardInfo = { file, samples: this.pending.length, bytes: data.length };
    this.shards.push(shard);
    this.pending = [];
    return shard;
  }
}
