// The browser volunteer's IndexedDB store (through `idb`, typed by VolunteerDb): shards already
// fetched are reused on the next visit, and the job's newest checkpoint is kept for a fast
// rejoin. Every entry carries its length and SHA-256, checked on each read: a corrupt or cut-off
// entry is deleted and fetched again. Shards live under a byte budget, least recently used out.
//
// The budget is the configured one, or less where the browser gives this origin less room:
// open() asks navigator.storage.estimate() and takes at most `quotaShare` of the room left
// (plus what the cache holds already). The browser may still refuse a write (its estimate is
// rough, other data of the origin grows): a QuotaExceededError, or a transaction aborted for
// quota. Then the cache shrinks its budget to what it holds, evicts least recently used shards
// and tries again; if even an empty cache cannot hold the shard, its bytes are served uncached.
// A cache problem never fails a read the coordinator can answer.
//
// Consistency: a shard and its meta record are written and deleted in one transaction, eviction
// commits in its own transaction before a retried write (an aborted write would take its
// evictions back with it), writes run one at a time, and open() deletes any record whose
// partner is missing. So after a reload every shard has its meta and the sizes add up.
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
export const DEFAULT_BUDGET_BYTES = 4 * 2 ** 30;
/** Default share of the origin's free storage the shards may take. */
export const DEFAULT_QUOTA_SHARE = 0.5;
/** Tries of one shard's write: as the budget says, then evicting to half of what is held, then to nothing. */
const QUOTA_RETRIES = 3;

export interface CacheStats {
  hits: number;
  misses: number;
  corrupt: number;
  evicted: number;
  /** Writes the browser refused for quota (each followed by eviction and a retry). */
  quotaErrors: number;
  /** Shards served without being kept (larger than the budget, or no room even after eviction). */
  uncached: number;
}

export interface CacheOptions {
  /** Share of the origin's free storage (quota - usage) the shards may take, in (0, 1]. */
  quotaShare?: number;
  /** The storage estimate (default navigator.storage.estimate(), where the browser has it). */
  estimate?: () => Promise<StorageEstimate>;
}

type ShardTx = IDBPTransaction<VolunteerDb, ('shards' | 'shardMeta')[], 'readwrite'>;

/** True for the browser refusing a write for lack of storage (the error, or the aborted transaction's). */
export function isQuotaError(e: unknown): e is DOMException {
  return e instanceof DOMException && e.name === 'QuotaExceededError';
}

export class VolunteerCache {
  readonly stats: CacheStats = { hits: 0, misses: 0, corrupt: 0, evicted: 0, quotaErrors: 0, uncached: 0 };
  /** Why the last shard or checkpoint could not be kept or read (null: none so far). */
  lastError: string | null = null;
  /** Last use stamps: strictly increasing, from the newest stored one on. */
  private clock = 0;
  /** The last write: the next one starts after it. */
  private writing: Promise<unknown> = Promise.resolve();

  private constructor(private readonly db: IDBPDatabase<VolunteerDb>, private budget: number) {}

  /**
   * Opens (or creates) the database; shards get min(`budgetBytes`, what they hold +
   * quotaShare x the origin's free storage). Repairs half-deleted entries and evicts down to
   * the budget.
   */
  static async open(budgetBytes = DEFAULT_BUDGET_BYTES, name = DB_NAME, opts: CacheOptions = {}): Promise<VolunteerCache> {
    if (!(budgetBytes > 0)) throw new RangeError(`the shard cache budget must be > 0 bytes, got ${budgetBytes}`);
    const share = opts.quotaShare ?? DEFAULT_QUOTA_SHARE;
    if (!(share > 0 && share <= 1)) throw new RangeError(`quotaShare must be in (0, 1], got ${share}`);
    const db = await openDB<VolunteerDb>(name, DB_VERSION, {
      upgrade(d, old) {
        // Version 1 kept size and use time inside the shard entries: start its shards afresh.
        if (old === 1) d.deleteObjectStore('shards');
        d.createObjectStore('shards', { keyPath: 'key' });
        d.createObjectStore('shardMeta', { keyPath: 'key' });
        if (old < 1) d.createObjectStore('checkpoints', { keyPath: 'job' });
      },
    });
    const cache = new VolunteerCache(db, budgetBytes);
    const held = await cache.repair();
    const estimate = opts.estimate ?? browserEstimate();
    const e = estimate ? await estimate() : null;
    if (e?.quota !== undefined) cache.budget = Math.min(budgetBytes, held + share * Math.max(0, e.quota - (e.usage ?? 0)));
    if (held > cache.budget) await cache.evictTo(cache.budget);
    return cache;
  }

  /** The shard budget in bytes now (it shrinks when the browser refuses a write for quota). */
  get budgetBytes(): number {
    return this.budget;
  }

  /** Bytes of shards stored, by their meta records. */
  async heldBytes(): Promise<number> {
    return (await this.db.getAll('shardMeta')).reduce((n, m) => n + m.size, 0);
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
        const write = this.writing.then(() => this.putShard(key, bytes));
        this.writing = write;
        await write;
        return bytes;
      },
    };
  }

  /** The shard's bytes if stored and intact (its last use touched); a broken entry is deleted. */
  private async getShard(key: string): Promise<Uint8Array | null> {
    try {
      const tx = this.db.transaction(['shards', 'shardMeta'], 'readwrite');
      const [e, meta] = await Promise.all([tx.objectStore('shards').get(key), tx.objectStore('shardMeta').get(key)]);
      const intact = !!e && !!meta && e.bytes.byteLength === meta.size && sha256Hex(e.bytes) === e.sha256;
      if (intact) await tx.objectStore('shardMeta').put({ ...meta, usedAt: this.tick() });
      else if (e || meta) {
        this.stats.corrupt++;
        await dropShards(tx, [key]);
      }
      await tx.done;
      return intact ? e.bytes : null;
    } catch (e) {
      // A broken or full database costs the cache, never the read: fetch instead.
      this.noteError(`reading ${key}`, e);
      return null;
    }
  }

  /**
   * Keeps the shard if it fits; never rejects (stats.uncached counts what was not kept). A
   * quota error says the browser's room is less than what the cache held plus this shard: the
   * budget becomes that (so a shard too big for the browser is not tried again), and the
   * retries evict deeper (half of what is held, then everything) without lowering the budget
   * further: a browser frees deleted bytes lazily, so one refusal says little about the next.
   */
  private async putShard(key: string, bytes: Uint8Array): Promise<void> {
    const entry = { key, bytes, sha256: sha256Hex(bytes) };
    try {
      let target = this.budget - bytes.byteLength;
      for (let attempt = 1; target >= 0; attempt++) {
        await this.evictTo(target);
        const refused = await quotaRefused(this.db.transaction(['shards', 'shardMeta'], 'readwrite'), (tx) => [
          tx.objectStore('shards').put(entry),
          tx.objectStore('shardMeta').put({ key, size: bytes.byteLength, usedAt: this.tick() }),
        ]);
        if (!refused) return;
        this.stats.quotaErrors++;
        this.noteError(`storing ${key} (${bytes.byteLength} bytes)`, refused);
        if (attempt >= QUOTA_RETRIES) break;
        const held = await this.heldBytes();
        if (attempt === 1) this.budget = Math.min(this.budget, held + bytes.byteLength - 1);
        if (held === 0) break; // nothing left to evict: the browser has no room for it at all
        target = attempt === 1 ? Math.min(this.budget - bytes.byteLength, Math.floor(held / 2)) : 0;
      }
    } catch (e) {
      this.noteError(`storing ${key}`, e);
    }
    this.stats.uncached++;
  }

  /** Deletes least recently used shards until they hold at most `target` bytes (one transaction). */
  private async evictTo(target: number): Promise<void> {
    const metas = await this.db.getAll('shardMeta');
    let total = metas.reduce((n, m) => n + m.size, 0);
    const evict: string[] = [];
    for (const m of metas.sort((a, b) => a.usedAt - b.usedAt)) {
      if (total <= target) break;
      evict.push(m.key);
      total -= m.size;
    }
    if (!evict.length) return;
    const tx = this.db.transaction(['shards', 'shardMeta'], 'readwrite');
    await dropShards(tx, evict);
    await tx.done;
    this.stats.evicted += evict.length;
  }

  /** Deletes shards without meta and meta without shards; returns the bytes the shards hold. */
  private async repair(): Promise<number> {
    const tx = this.db.transaction(['shards', 'shardMeta'], 'readwrite');
    const [keys, metas] = await Promise.all([tx.objectStore('shards').getAllKeys(), tx.objectStore('shardMeta').getAll()]);
    const stored = new Set(keys);
    const described = new Set(metas.map((m) => m.key));
    const orphans = [...keys.filter((k) => !described.has(k)), ...metas.filter((m) => !stored.has(m.key)).map((m) => m.key)];
    await dropShards(tx, orphans);
    await tx.done;
    this.stats.corrupt += orphans.length;
    this.clock = metas.reduce((t, m) => Math.max(t, m.usedAt), 0);
    return metas.filter((m) => stored.has(m.key)).reduce((n, m) => n + m.size, 0);
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

  /**
   * Keeps this checkpoint as the job's one (replacing an older one). Out of quota, shards make
   * room for it; returns false when it still could not be kept (lastError says why).
   */
  async keepCheckpoint(job: string, step: number, bytes: Uint8Array): Promise<boolean> {
    const entry = { job, step, bytes, sha256: sha256Hex(bytes) };
    const put = () => quotaRefused(this.db.transaction('checkpoints', 'readwrite'), (tx) => [tx.store.put(entry)]);
    const write = this.writing.then(async () => {
      let refused = await put();
      if (refused) {
        this.stats.quotaErrors++;
        // Shards make room: the budget shrinks below what they hold by the checkpoint's size.
        this.budget = Math.max(0, Math.min(this.budget, await this.heldBytes()) - bytes.byteLength);
        await this.evictTo(this.budget);
        refused = await put();
      }
      if (refused) this.noteError(`keeping the checkpoint of step ${step} (${bytes.byteLength} bytes)`, refused);
      return !refused;
    });
    // The next write waits for this one, whatever its outcome (the caller hears a failure).
    this.writing = write.then(() => undefined, () => undefined);
    return write;
  }

  close(): void {
    this.db.close();
  }

  private tick(): number {
    this.clock = Math.max(Date.now(), this.clock + 1);
    return this.clock;
  }

  private noteError(what: string, e: unknown): void {
    this.lastError = `${what}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`;
  }
}

/** navigator.storage.estimate where the browser (or worker) has it. */
function browserEstimate(): (() => Promise<StorageEstimate>) | null {
  const storage = typeof navigator === 'undefined' ? undefined : navigator.storage;
  return storage && typeof storage.estimate === 'function' ? () => storage.estimate() : null;
}

/**
 * Runs `requests` in `tx` and waits for it to commit. Returns null, or the quota error the
 * browser refused it with (on the request or as the transaction's abort); other errors throw.
 */
async function quotaRefused<T extends { readonly done: Promise<void>; readonly error: DOMException | null }>(
  tx: T, requests: (tx: T) => Promise<unknown>[],
): Promise<DOMException | null> {
  try {
    await Promise.all([...requests(tx), tx.done]);
    return null;
  } catch (e) {
    if (isQuotaError(e)) return e;
    if (isQuotaError(tx.error)) return tx.error;
    throw e;
  }
}

/** Deletes shards and their meta records inside `tx`. */
async function dropShards(tx: ShardTx, keys: readonly string[]): Promise<void> {
  await Promise.all(keys.flatMap((k) => [tx.objectStore('shards').delete(k), tx.objectStore('shardMeta').delete(k)]));
}
