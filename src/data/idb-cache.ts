// The browser volunteer's IndexedDB store (through `idb`, typed by VolunteerDb): shards already
// fetched are reused on the next visit, and the job's newest checkpoint is kept for a fast
// rejoin. Every entry carries its length and SHA-256, checked on each read: a corrupt or cut-off
// entry is deleted and fetched again. Shards live under a byte budget, least recently used out.
import { openDB, type DBSchema, type IDBPDatabase, type IDBPTransaction } from 'idb';
import { sha256Hex } from '../checkpoint/sha256.ts';
import type { ShardSource } from './source.ts';

export interface VolunteerDb extends DBSchema {
  shards: { key: string; value: { key: string; bytes: Uint8Array; sha256: string } };
  /** Size and last use of each shard, apart from its bytes: eviction and hits touch only these. */
  shardMeta: { key: string; value: { key: string; size: number; usedAt: number } };
  checkpoints: { key: string; value: { job: string; step: number; bytes: Uint8Array; sha256: string } };
}

export const DB_NAME = 'volunteer-trainer';
export const DB_VERSION = 2;
/** Default shard budget: all of CIFAR-10 or MNIST, and a slice of an ImageNet job. */
export const DEFAULT_BUDGET_BYTES = 1 << 30;

export interface CacheStats { hits: number; misses: number; corrupt: number; evicted: number }

export class VolunteerCache {
  readonly stats: CacheStats = { hits: 0, misses: 0, corrupt: 0, evicted: 0 };
  private constructor(private readonly db: IDBPDatabase<VolunteerDb>, private readonly budget: number) {}

  static async open(budgetBytes = DEFAULT_BUDGET_BYTES, name = DB_NAME): Promise<VolunteerCache> {
    const db = await openDB<VolunteerDb>(name, DB_VERSION, {
      upgrade(d, old) {
        // Version 1 kept size and use time inside the shard entries: start its shards afresh.
        if (old === 1) d.deleteObjectStore('shards');
        d.createObjectStore('shards', { keyPath: 'key' });
        d.createObjectStore('shardMeta', { keyPath: 'key' });
        if (old < 1) d.createObjectStore('checkpoints', { keyPath: 'job' });
      },
    });
    return new VolunteerCache(db, budgetBytes);
  }

  /** `inner` with a cache in front; manifest.json always comes from `inner` (it may change). */
  shards(inner: ShardSource): ShardSource {
    return {
      origin: inner.origin,
      read: async (file) => {
        if (file === 'manifest.json') return inner.read(file);
        const key = `${inner.origin}${file}`;
        const hit = await this.getShard(key);
        if (hit) {
          this.stats.hits++;
          return hit;
        }
        this.stats.misses++;
        const bytes = await inner.read(file);
        await this.putShard(key, bytes);
        return bytes;
      },
    };
  }

  private async getShard(key: string): Promise<Uint8Array | null> {
    const [e, meta] = await Promise.all([this.db.get('shards', key), this.db.get('shardMeta', key)]);
    if (!e && !meta) return null;
    if (!e || !meta || e.bytes.byteLength !== meta.size || sha256Hex(e.bytes) !== e.sha256) {
      this.stats.corrupt++;
      await this.deleteShards([key]);
      return null;
    }
    await this.db.put('shardMeta', { ...meta, usedAt: Date.now() });
    return e.bytes;
  }

  private async putShard(key: string, bytes: Uint8Array): Promise<void> {
    if (bytes.byteLength > this.budget) return;
    // Evict least recently used shards until the new one fits the budget (sizes from the
    // small meta records: no shard's bytes are read for this).
    const metas = await this.db.getAll('shardMeta');
    let total = metas.reduce((n, m) => n + m.size, 0) + bytes.byteLength;
    const evict: string[] = [];
    for (const m of metas.sort((a, b) => a.usedAt - b.usedAt)) {
      if (total <= this.budget) break;
      evict.push(m.key);
      total -= m.size;
    }
    this.stats.evicted += evict.length;
    const tx = this.db.transaction(['shards', 'shardMeta'], 'readwrite');
    await dropShards(tx, evict);
    await tx.objectStore('shards').put({ key, bytes, sha256: sha256Hex(bytes) });
    await tx.objectStore('shardMeta').put({ key, size: bytes.byteLength, usedAt: Date.now() });
    await tx.done;
  }

  private async deleteShards(keys: readonly string[]): Promise<void> {
    const tx = this.db.transaction(['shards', 'shardMeta'], 'readwrite');
    await dropShards(tx, keys);
    await tx.done;
  }

  /** The kept checkpoint of `job` if it is of `step` and intact. */
  async checkpoint(job: string, step: number): Promise<Uint8Array | null> {
    const e = await this.db.get('checkpoints', job);
    if (!e || e.step !== step) return null;
    if (sha256Hex(e.bytes) !== e.sha256) {
      this.stats.corrupt++;
      await this.db.delete('checkpoints', job);
      return null;
    }
    return e.bytes;
  }

  /** Keeps this checkpoint as the job's one (replacing an older one). */
  async keepCheckpoint(job: string, step: number, bytes: Uint8Array): Promise<void> {
    const tx = this.db.transaction('checkpoints', 'readwrite');
    await tx.store.put({ job, step, bytes, sha256: sha256Hex(bytes) });
    await tx.done;
  }

  close(): void {
    this.db.close();
  }
}

type ShardTx = IDBPTransaction<VolunteerDb, ('shards' | 'shardMeta')[], 'readwrite'>;

/** Deletes shards and their meta records inside `tx`. */
async function dropShards(tx: ShardTx, keys: readonly string[]): Promise<void> {
  for (const k of keys) {
    await tx.objectStore('shards').delete(k);
    await tx.objectStore('shardMeta').delete(k);
  }
}
