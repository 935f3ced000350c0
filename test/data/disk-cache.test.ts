// The Node volunteer's shard cache on disk: hits across restarts (a new cache object on the
// same folder), the manifest as the key (not the address), damaged or half-written shards
// fetched again, and the byte budget kept by evicting the least recently used: also when a
// batch misses several shards at once, and after a restart (last use is the file's mtime).
// A crashed write's temporary file is cleaned up; a write the disk refuses costs the cache only.
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskShardCache, STALE_TMP_MS, cacheFolderName } from '../../src/data/disk-cache.ts';
import type { ShardSource } from '../../src/data/source.ts';

const manifest = new TextEncoder().encode('{"format":"vt-shards"}');
function source(origin: string, files: Record<string, Uint8Array>) {
  const reads: string[] = [];
  const s: ShardSource = {
    origin, read: async (f) => { reads.push(f); if (f === 'manifest.json') return manifest; const b = files[f]; if (!b) throw new Error(`no ${f}`); return b; },
  };
  return { s, reads };
}
const bytes = (n: number, v: number) => new Uint8Array(n).fill(v);
let dir = '';
afterEach(async () => { if (dir) await rm(dir, { recursive: true, force: true }); });

describe('disk shard cache', () => {
  it('serves shards again after a restart and from another address of the same data set', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vt-dc-'));
    const files = { 'train-0.tar': bytes(100, 1), 'train-1.tar': bytes(100, 2) };
    const a = source('http://a/', files);
    const c1 = new DiskShardCache(dir, 1e6, 'cifar10').shards(a.s);
    await c1.read('manifest.json');
    expect(await c1.read('train-0.tar')).toEqual(files['train-0.tar']);
    const b = source('https://b:8443/', files);
    const cache2 = new DiskShardCache(dir, 1e6, 'cifar10');
    const c2 = cache2.shards(b.s);
    await c2.read('manifest.json');
    expect(await c2.read('train-0.tar')).toEqual(files['train-0.tar']);
    expect(b.reads).toEqual(['manifest.json']);
    expect(cache2.stats).toMatchObject({ hits: 1, misses: 0 });
    expect(await readdir(dir)).toEqual([cacheFolderName('cifar10', manifest)]);
  });

  it('a damaged shard or one without its checksum is fetched again; the budget evicts the least recently used', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vt-dc-'));
    const files = { s0: bytes(400, 1), s1: bytes(400, 2), s2: bytes(400, 3) };
    const src = source('http://a/', files);
    const cache = new DiskShardCache(dir, 1000, 'mnist');
    const c = cache.shards(src.s);
    await c.read('manifest.json');
    const folder = join(dir, cacheFolderName('mnist', manifest));
    await c.read('s0');
    await c.read('s1');
    await utimes(join(folder, 's0'), new Date(1000), new Date(1000));
    await utimes(join(folder, 's1'), new Date(2000), new Date(2000));
    await c.read('s2'); // 1200 bytes > 1000: s0, the oldest, goes
    expect((await readdir(folder)).sort()).toEqual(['s1', 's1.sha256', 's2', 's2.sha256']);
    expect(cache.stats.evicted).toBe(1);
    await writeFile(join(folder, 's1'), bytes(400, 9)); // damaged on disk
    expect(await c.read('s1')).toEqual(files.s1);
    await rm(join(folder, 's2.sha256')); // written, then a crash before its checksum
    expect(await c.read('s2')).toEqual(files.s2);
    expect(cache.stats.corrupt).toBe(2);
    expect(src.reads.filter((f) => f !== 'manifest.json')).toEqual(['s0', 's1', 's2', 's1', 's2']);
  });

  it('misses at once stay within the budget; a restart keeps the last-use order; crashed writes are cleaned up', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vt-dc-'));
    const files = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`s${i}`, bytes(400, i + 1)]));
    const src = source('http://a/', files);
    const cache = new DiskShardCache(dir, 1000, 'imagenet');
    const c = cache.shards(src.s);
    await c.read('manifest.json');
    const folder = join(dir, cacheFolderName('imagenet', manifest));
    // A batch needs five shards at once: their writes must not overshoot 1,000 bytes together.
    const got = await Promise.all(['s0', 's1', 's2', 's3', 's4'].map((f) => c.read(f)));
    got.forEach((b, i) => expect(b).toEqual(files[`s${i}`]));
    const kept = (await readdir(folder)).filter((f) => !f.endsWith('.sha256'));
    expect(kept.length, `kept ${kept.join(', ')}`).toBe(2);
    expect(cache.stats.evicted).toBe(3);
    // Age them apart: the first kept one used last, so after a restart the other one goes first.
    const [older, newer] = kept.sort();
    await utimes(join(folder, older!), new Date(5000), new Date(5000));
    await utimes(join(folder, newer!), new Date(1000), new Date(1000));
    // A crashed write long ago, and another process's write under way now.
    await writeFile(join(folder, 's9.12345.tmp'), bytes(300, 9));
    await utimes(join(folder, 's9.12345.tmp'), new Date(Date.now() - STALE_TMP_MS - 1000), new Date(Date.now() - STALE_TMP_MS - 1000));
    const restarted = new DiskShardCache(dir, 1000, 'imagenet');
    const c2 = restarted.shards(src.s);
    await c2.read('manifest.json');
    expect(await c2.read('s5')).toEqual(files.s5);
    const after = (await readdir(folder)).sort();
    expect(after).toEqual([older!, `${older!}.sha256`, 's5', 's5.sha256']);
    expect(restarted.stats).toMatchObject({ evicted: 1, misses: 1 });
    expect(await c2.read(older!)).toEqual(files[older!]);
    expect(restarted.stats.hits).toBe(1);
    // The hit touched its mtime: it is the most recent now.
    expect((await stat(join(folder, older!))).mtimeMs).toBeGreaterThan(Date.now() - 60_000);
  });

  it('a write the disk refuses costs the cache, never the read', async () => {
    dir = await mkdtemp(join(tmpdir(), 'vt-dc-'));
    const files = { s0: bytes(100, 1), huge: bytes(2000, 2) };
    const src = source('http://a/', files);
    const cache = new DiskShardCache(dir, 1000, 'mnist');
    const c = cache.shards(src.s);
    await c.read('manifest.json');
    const folder = join(dir, cacheFolderName('mnist', manifest));
    // Where the shard's temporary file should go stands a folder: the write fails (even as root).
    await mkdir(join(folder, `s0.${process.pid}.tmp`));
    expect(await c.read('s0')).toEqual(files.s0);
    expect(await c.read('huge')).toEqual(files.huge); // over the whole budget: not kept
    expect(cache.stats.notKept).toBe(2);
    expect(cache.lastError).toMatch(/could not keep .*s0/);
    expect((await readdir(folder)).sort()).toEqual([`s0.${process.pid}.tmp`]);
  });
});
