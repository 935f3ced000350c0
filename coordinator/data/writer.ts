// Writes one split's samples into shards of `samplesPerShard` (atomically, gzipped when
// asked), keys sampleKey(0), sampleKey(1), ... in the order samples arrive.

import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { sampleKey, shardFileName, type ImageEncoding, type ShardInfo, type SplitInfo, type SplitName } from '../../src/data/manifest.ts';
import { packShard, type EncodedSample } from '../../src/data/shard.ts';
import { writeFileAtomic } from './files.ts';

export class SplitWriter {
  private pending: EncodedSample[] = [];
  private readonly shards: ShardInfo[] = [];
  private next = 0;

  constructor(
    private readonly dir: string,
    private readonly split: SplitName,
    private readonly encoding: ImageEncoding,
    private readonly samplesPerShard: number,
    private readonly gzip: boolean,
  ) {}

  async add(bytes: Uint8Array, label: number): Promise<void> {
    this.pending.push({ key: sampleKey(this.next++), encoding: this.encoding, bytes, label });
    if (this.pending.length >= this.samplesPerShard) await this.flush();
  }

  async finish(): Promise<SplitInfo> {
    await this.flush();
    return { samples: this.next, shards: this.shards };
  }

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const tar = packShard(this.pending);
    const data = this.gzip ? gzipSync(tar, { level: 6 }) : tar;
    const file = shardFileName(this.split, this.shards.length, this.gzip);
    await writeFileAtomic(join(this.dir, file), data);
    this.shards.push({ file, samples: this.pending.length, bytes: data.length });
    this.pending = [];
  }
}
