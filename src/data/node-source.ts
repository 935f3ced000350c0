// Shards in a local folder (the coordinator's cache, Node peers sharing a disk).

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DataError } from './errors.ts';
import type { ShardSource } from './source.ts';

export function fileShardSource(dir: string): ShardSource {
  return {
    origin: `${dir}/`,
    async read(file) {
      if (file.includes('/') || file.includes('\\') || file.startsWith('.')) {
        throw new DataError('bad-input', `"${file}" is not a plain file name`);
      }
      try {
        return new Uint8Array(await readFile(join(dir, file)));
      } catch (e) {
        throw new DataError('fetch-failed', `cannot read ${join(dir, file)} (${String(e)})`, { cause: e });
      }
    },
  };
}
