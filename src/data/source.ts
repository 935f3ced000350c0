// Where shard files come from: the coordinator over HTTP (browser and Node peers), a local
// folder (node-source.ts), and later an IndexedDB cache in front of either.

import { DataError } from './errors.ts';
import { MANIFEST_FILE, validateManifest, type Manifest } from './manifest.ts';

export interface ShardSource {
  /** Human-readable origin for error messages. */
  readonly origin: string;
  /** The whole bytes of a file beside the manifest (a shard, or manifest.json). */
  read(file: string): Promise<Uint8Array>;
}

/** Files under `baseUrl` (e.g. "http://host:port/data/cifar10/"). */
export function httpShardSource(baseUrl: string, fetchFn: typeof fetch = fetch): ShardSource {
  const base = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
  return {
    origin: base,
    async read(file) {
      const url = new URL(file, base).href;
      let res: Response;
      try {
        res = await fetchFn(url);
      } catch (e) {
        throw new DataError('fetch-failed', `GET ${url} failed (${String(e)})`, { cause: e });
      }
      if (!res.ok) throw new DataError('fetch-failed', `GET ${url} answered ${res.status} ${res.statusText}`);
      return new Uint8Array(await res.arrayBuffer());
    },
  };
}

export async function loadManifest(source: ShardSource): Promise<Manifest> {
  const bytes = await source.read(MANIFEST_FILE);
  const where = `${source.origin}${MANIFEST_FILE}`;
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new DataError('bad-manifest', `${where} is not valid JSON (${String(e)})`, { cause: e });
  }
  return validateManifest(json, where);
}
