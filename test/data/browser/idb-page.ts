// Test page: the volunteer's IndexedDB cache in a real browser. An in-page shard source counts
// the reads that reach it, so the test sees what the cache saves and what it fetches again.
import { openDB } from 'idb';
import { DB_VERSION, VolunteerCache, type VolunteerDb } from '../../../src/data/idb-cache.ts';
import type { ShardSource } from '../../../src/data/source.ts';

export interface CacheReport {
  firstReads: number;
  secondReads: number;
  reopenedReads: number;
  corruptRefetched: boolean;
  cutRefetched: boolean;
  evictedOldest: boolean;
  checkpointKept: boolean;
  damagedCheckpointRefused: boolean;
  stats: { hits: number; misses: number; corrupt: number; evicted: number };
}

declare global {
  interface Window { runCacheChecks(): Promise<CacheReport>; ready: boolean }
}

const bytesFor = (file: string, n: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 31 + file.length * 7) & 255);

function countingSource(reads: string[]): ShardSource {
  return { origin: 'http://coordinator/data/mnist/', read: async (file) => { reads.push(file); return bytesFor(file, 1000); } };
}

const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);

window.runCacheChecks = async (): Promise<CacheReport> => {
  const name = `vt-test-${Math.random().toString(36).slice(2)}`;
  const reads: string[] = [];
  let cache = await VolunteerCache.open(3500, name);
  let src = cache.shards(countingSource(reads));
  for (const f of ['a.tar', 'b.tar', 'a.tar', 'manifest.json']) if (!same(await src.read(f), bytesFor(f, 1000))) throw new Error(`wrong bytes for ${f}`);
  const firstReads = reads.length; // a, b, manifest (always fetched)
  await src.read('b.tar');
  const secondReads = reads.length - firstReads;
  // A new visit: a fresh cache object on the same database.
  cache.close();
  cache = await VolunteerCache.open(3500, name);
  src = cache.shards(countingSource(reads));
  const before = reads.length;
  await src.read('a.tar');
  await src.read('b.tar');
  const reopenedReads = reads.length - before;
  // Damage entries behind the cache's back: flipped bytes, and a cut-off entry.
  const db = await openDB<VolunteerDb>(name, DB_VERSION);
  const a = (await db.get('shards', 'http://coordinator/data/mnist/a.tar'))!;
  a.bytes[10] = (a.bytes[10]! + 1) & 255;
  await db.put('shards', a);
  const b = (await db.get('shards', 'http://coordinator/data/mnist/b.tar'))!;
  await db.put('shards', { ...b, bytes: b.bytes.subarray(0, 500) });
  const r0 = reads.length;
  const a2 = await src.read('a.tar');
  const corruptRefetched = reads.length === r0 + 1 && same(a2, bytesFor('a.tar', 1000));
  const b2 = await src.read('b.tar');
  const cutRefetched = reads.length === r0 + 2 && same(b2, bytesFor('b.tar', 1000));
  // Budget 3,500 bytes holds 3 shards: a fourth pushes out the least recently used (a).
  await src.read('c.tar');
  await src.read('b.tar');
  await src.read('d.tar');
  const keys = await db.getAllKeys('shards');
  const evictedOldest = !keys.includes('http://coordinator/data/mnist/a.tar') && keys.length === 3;
  // Checkpoints: one per job, the step must match, a damaged one is refused.
  const file = bytesFor('ckpt', 5000);
  await cache.keepCheckpoint('job-1', 40, file);
  const checkpointKept = !!(await cache.checkpoint('job-1', 40)) && (await cache.checkpoint('job-1', 41)) === null;
  const c = (await db.get('checkpoints', 'job-1'))!;
  c.bytes[0] = (c.bytes[0]! + 1) & 255;
  await db.put('checkpoints', c);
  const damagedCheckpointRefused = (await cache.checkpoint('job-1', 40)) === null && (await db.get('checkpoints', 'job-1')) === undefined;
  db.close();
  const stats = { ...cache.stats };
  cache.close();
  return { firstReads, secondReads, reopenedReads, corruptRefetched, cutRefetched, evictedOldest, checkpointKept, damagedCheckpointRefused, stats };
};
window.ready = true;
