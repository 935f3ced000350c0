// A Node volunteer's shard cache on disk (`npm run volunteer -- --cache-dir DIR`): shards it
// fetched survive a restart, within a byte budget, least recently used evicted first.
//
// Layout: DIR/<data set>-<first 16 hex of the manifest's sha256>/<shard file>, with a sidecar
// <shard file>.sha256 written after the shard. Keyed by the manifest's bytes, not by the
// coordinator's address: the same data set from another address (or copied in by hand, as the
// lowcomm bench does) is reused, and a rebuilt data set never mixes with the old one. A shard
// is written to a temporary name and renamed, so a crash never leaves a half shard under its
// name; one whose bytes do not match its sidecar is deleted and fetched again. Last use is the
// file's mtime (touched on every hit), so the order survives a restart.
//
// Writes go one at a time: a batch misses several shards at once, and each write's eviction must
// see the ones before it, or together they would overshoot the budget. The budget counts every
// data set in DIR and the temporary files; a temporary file older than STALE_TMP_MS (a crash
// mid-write) is deleted. Checksums are the checkpoint format's sha256Hex, node:crypto's hash
// under Node (a shard is tens of MB).
import { mkdir, readFile, readdir, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MANIFEST_FILE } from './manifest.ts';
import type { ShardSource } from './source.ts';
import { sha256Hex } from '../checkpoint/sha256.ts';

export interface DiskCacheStats {
  hits: number;
  misses: number;
  corrupt: number;
  evicted: number;
  /** Shards fetched but not kept: larger than the budget, or the disk refused the write. */
  notKept: number;
}

/** A temporary file this old is a crashed write (a write of one shard takes seconds). */
export const STALE_TMP_MS = 10 * 60_000;

/** The cache folder of a data set with this manifest (for pre-filling it). */
export function cacheFolderName(dataset: string, manifestBytes: Uint8Array): string {
  return `${dataset.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40)}-${sha256Hex(manifestBytes).slice(0, 16)}`;
}

const plainName = (file: string) => !file.includes('/') && !file.includes('\\') && !file.startsWith('.');

export class DiskShardCache {
  readonly stats: DiskCacheStats = { hits: 0, misses: 0, corrupt: 0, evicted: 0, notKept: 0 };
  /** Why the last shard could not be kept (null: none failed). */
  lastError: string | null = null;
  /** The last write: the next one starts after it. */
  private writing: Promise<void> = Promise.resolve();

  constructor(readonly dir: string, readonly budgetBytes: number, private readonly dataset: string) {
    if (!(budgetBytes > 0)) throw new RangeError(`the shard cache budget must be > 0 bytes, got ${budgetBytes}`);
  }

  /** `inner` with this cache in front (the manifest is always read from `inner`). */
  shards(inner: ShardSource): ShardSource {
    let folder: string | null = null;
    return {
      origin: inner.origin,
      read: async (file) => {
        if (file === MANIFEST_FILE) {
          const bytes = await inner.read(file);
          folder = join(this.dir, cacheFolderName(this.dataset, bytes));
          await mkdir(folder, { recursive: true });
          return bytes;
        }
        if (!folder || !plainName(file)) return inner.read(file);
        const hit = await this.get(folder, file);
        if (hit) {
          this.stats.hits++;
          return hit;
        }
        this.stats.misses++;
        const bytes = await inner.read(file);
        const into = folder;
        const write = this.writing.then(() => this.put(into, file, bytes));
        this.writing = write;
        await write;
        return bytes;
      },
    };
  }

  private async get(folder: string, file: string): Promise<Uint8Array | null> {
    const path = join(folder, file);
    const [bytes, sum] = await Promise.all([readFile(path).catch(() => null), readFile(`${path}.sha256`, 'utf8').catch(() => null)]);
    if (!bytes && !sum) return null;
    if (!bytes || !sum || sha256Hex(bytes) !== sum.trim()) {
      this.stats.corrupt++;
      await Promise.all([rm(path, { force: true }), rm(`${path}.sha256`, { force: true })]);
      return null;
    }
    const now = new Date();
    await utimes(path, now, now).catch(() => undefined);
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Never rejects: a shard that cannot be kept is counted in stats.notKept. */
  private async put(folder: string, file: string, bytes: Uint8Array): Promise<void> {
    if (bytes.byteLength > this.budgetBytes) {
      this.stats.notKept++;
      return;
    }
    const path = join(folder, file);
    const tmp = `${path}.${process.pid}.tmp`;
    try {
      await this.evictFor(bytes.byteLength);
      await writeFile(tmp, bytes);
      await rename(tmp, path);
      await writeFile(`${path}.sha256`, sha256Hex(bytes));
    } catch (e) {
      // A full or read-only disk costs the cache, never the step.
      this.stats.notKept++;
      this.lastError = `could not keep ${path} (${e instanceof Error ? e.message : String(e)})`;
      await Promise.allSettled([rm(tmp, { force: true }), rm(path, { force: true }), rm(`${path}.sha256`, { force: true })]);
    }
  }

  /** Deletes least recently used shards (of every data set here) until `incoming` more bytes fit. */
  private async evictFor(incoming: number): Promise<void> {
    const files: { path: string; size: number; used: number }[] = [];
    let writing = 0; // other processes' writes under way: they take room too
    for (const d of await readdir(this.dir, { withFileTypes: true }).catch(() => [])) {
      if (!d.isDirectory()) continue;
      for (const f of await readdir(join(this.dir, d.name)).catch(() => [] as string[])) {
        if (f.endsWith('.sha256')) continue;
        const path = join(this.dir, d.name, f);
        const s = await stat(path).catch(() => null);
        if (!s?.isFile()) continue;
        if (!f.endsWith('.tmp')) files.push({ path, size: s.size, used: s.mtimeMs });
        else if (Date.now() - s.mtimeMs > STALE_TMP_MS) await rm(path, { force: true });
        else writing += s.size;
      }
    }
    let total = files.reduce((n, f) => n + f.size, 0) + writing + incoming;
    for (const f of files.sort((a, b) => a.used - b.used)) {
      if (total <= this.budgetBytes) break;
      await Promise.all([rm(f.path, { force: true }), rm(`${f.path}.sha256`, { force: true })]);
      total -= f.size;
      this.stats.evicted++;
    }
  }
}
