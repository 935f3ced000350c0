// Counts the bytes a shard source delivers. The volunteer puts it straight on the HTTP source,
// below any cache, so the count is what this peer downloaded from the coordinator (a cache hit
// never reaches it); every step result reports the running total as `fetchedBytes`.
import type { ShardSource } from './source.ts';

export interface CountingSource extends ShardSource {
  /** Bytes read through this source so far (manifest included). */
  readonly bytes: number;
  /** Files read through this source so far. */
  readonly files: number;
}

export function countingSource(inner: ShardSource): CountingSource {
  let bytes = 0;
  let files = 0;
  return {
    origin: inner.origin,
    async read(file) {
      const b = await inner.read(file);
      bytes += b.byteLength;
      files++;
      return b;
    },
    get bytes() { return bytes; },
    get files() { return files; },
  };
}
