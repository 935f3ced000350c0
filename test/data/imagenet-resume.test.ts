// Interrupted builds resume: the shards a build completed are kept (not rewritten) and the
// result is byte for byte what an uninterrupted build writes, whether the build threw or its
// process was killed with SIGKILL. Other options or another source start over. A failed
// build leaves an earlier complete folder as it was. ensureImagenet builds once and reuses.

import { spawn } from 'node:child_process';
import { appendFile, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildShards, ensureImagenet, readComplete, type BuildOptions } from '../../coordinator/data/cli.ts';
import type { SplitName } from '../../src/data/manifest.ts';
import { tempDir } from './helpers.ts';
import { makeImagenetFolder } from '../../testbed/imagenet-fixtures.ts';

const SHARD = 4;
let root: string;
let src: string;
let clean: string;
let stderr: string[] = [];

afterEach(() => vi.restoreAllMocks());
const quiet = (): void => {
  stderr = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr.push(String(chunk));
    return true;
  });
};

const opts = (out: string, extra: Partial<BuildOptions> = {}): BuildOptions => ({
  dataset: 'imagenet', src, out, size: 32, samplesPerShard: SHARD, progress: false, ...extra,
});

/** Every file of `dir` by name, with its bytes. */
async function contents(dir: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  for (const f of (await readdir(dir)).sort()) files.set(f, await readFile(join(dir, f)));
  return files;
}

async function expectSameFolder(a: string, b: string): Promise<void> {
  const [x, y] = [await contents(a), await contents(b)];
  expect([...x.keys()]).toEqual([...y.keys()]);
  for (const [name, bytes] of x) expect(bytes.equals(y.get(name) ?? Buffer.alloc(0)), `${name} differs`).toBe(true);
}

async function mtimes(dir: string, files: readonly string[]): Promise<number[]> {
  return Promise.all(files.map(async (f) => (await stat(join(dir, f))).mtimeMs));
}

/** A hook that records the shards written and throws after `split` shard `at`. */
function recorder(stopAt?: { split: SplitName; at: number }): { written: string[]; hook: NonNullable<BuildOptions['onShardWritten']> } {
  const written: string[] = [];
  return {
    written,
    hook: (split, index) => {
      written.push(`${split}-${index}`);
      if (stopAt && split === stopAt.split && index === stopAt.at) throw new Error(`interrupted after ${split} shard ${index}`);
    },
  };
}

const trainShards = 10; // 4 classes x 10 images in shards of 4
const valShards = 2;
const shardName = (split: SplitName, i: number): string => `${split}-${String(i).padStart(6, '0')}.tar`;

beforeAll(async () => {
  root = await tempDir('imagenet-resume');
  src = join(root, 'src');
  await makeImagenetFolder(src, { classes: 4, trainPerClass: 10, valPerClass: 2, valLayout: 'folders', sizes: [20, 60], seed: 3 });
  clean = join(root, 'clean');
  quiet();
  const { written, hook } = recorder();
  await buildShards(opts(clean, { onShardWritten: hook }));
  expect(written).toHaveLength(trainShards + valShards);
  vi.restoreAllMocks();
});

describe('resuming an interrupted build', () => {
  it('a build that threw after 3 train shards keeps them, and the next run writes only the rest', async () => {
    quiet();
    const out = join(root, 'interrupted');
    const first = recorder({ split: 'train', at: 2 });
    await expect(buildShards(opts(out, { onShardWritten: first.hook }))).rejects.toThrow('interrupted after train shard 2');
    expect(first.written).toEqual(['train-0', 'train-1', 'train-2']);
    const building = `${out}.building`;
    expect(await readComplete(out)).toBeNull();
    expect((await readdir(building)).sort()).toEqual(['build-state.json', shardName('train', 0), shardName('train', 1), shardName('train', 2)]);
    expect(stderr.join('')).toMatch(/build stopped; its 3 complete shard\(s\) are kept in .*interrupted\.building: run the same command again to resume/);
    const kept = [0, 1, 2].map((i) => shardName('train', i));
    const before = await mtimes(building, kept);
    await new Promise((r) => setTimeout(r, 20)); // a rewrite would have a later mtime
    const second = recorder();
    await buildShards(opts(out, { onShardWritten: second.hook }));
    expect(second.written).toEqual([...Array.from({ length: trainShards - 3 }, (_, i) => `train-${i + 3}`), 'val-0', 'val-1']);
    expect(stderr.join('')).toMatch(/resuming the build in .*interrupted\.building: 3 shard\(s\) already written/);
    expect(await mtimes(out, kept)).toEqual(before);
    await expectSameFolder(out, clean);
    expect((await readdir(root)).filter((f) => f.startsWith('interrupted'))).toEqual(['interrupted']);
  });

  it('interrupted in val: the train split is not read again', async () => {
    quiet();
    const out = join(root, 'in-val');
    await expect(buildShards(opts(out, { onShardWritten: recorder({ split: 'val', at: 0 }).hook }))).rejects.toThrow('interrupted after val shard 0');
    const second = recorder();
    await buildShards(opts(out, { onShardWritten: second.hook }));
    expect(second.written).toEqual(['val-1']);
    await expectSameFolder(out, clean);
  });

  it('other options start over', async () => {
    quiet();
    const out = join(root, 'other-options');
    await expect(buildShards(opts(out, { onShardWritten: recorder({ split: 'train', at: 1 }).hook }))).rejects.toThrow();
    const second = recorder();
    const m = await buildShards(opts(out, { samplesPerShard: 5, onShardWritten: second.hook }));
    expect(stderr.join('')).toMatch(/starting .*other-options\.building over: the options changed/);
    expect(second.written).toHaveLength(8 + 2);
    expect(m.splits.train.shards.map((s) => s.samples)).toEqual([5, 5, 5, 5, 5, 5, 5, 5]);
  });

  it('a build killed with SIGKILL resumes after its last recorded shard', async () => {
    const out = join(root, 'killed');
    const cli = resolve('coordinator/data/cli.ts');
    const code = `import(${JSON.stringify(cli)}).then((m) => m.buildShards({ dataset: 'imagenet', src: ${JSON.stringify(src)}, ` +
      `out: ${JSON.stringify(out)}, size: 32, samplesPerShard: ${SHARD}, progress: false,
      onShardWritten: (split, i) => { process.stdout.write(split + ' ' + i + '\\n'); return new Promise((r) => setTimeout(r, 300)); } }))`;
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_code, signal) => r(signal)));
    for await (const line of createInterface({ input: child.stdout })) {
      if (line === 'train 1') {
        child.kill('SIGKILL');
        break;
      }
    }
    expect(await exited).toBe('SIGKILL');
    const building = `${out}.building`;
    const state = JSON.parse(await readFile(join(building, 'build-state.json'), 'utf8')) as { splits: { train: { shards: { info: { file: string } }[] } } };
    const kept = state.splits.train.shards.map((s) => s.info.file);
    expect(kept.slice(0, 2)).toEqual([shardName('train', 0), shardName('train', 1)]);
    expect(await readFile(join(building, 'build.lock'), 'utf8')).toMatch(new RegExp(`^${child.pid} `));
    const before = await mtimes(building, kept);
    quiet();
    const second = recorder();
    await buildShards(opts(out, { onShardWritten: second.hook }));
    expect(second.written).toHaveLength(trainShards + valShards - kept.length);
    expect(await mtimes(out, kept)).toEqual(before);
    await expectSameFolder(out, clean);
  });
});

describe('a failed build', () => {
  it('leaves a folder that was already built as it was', async () => {
    quiet();
    const out = join(root, 'kept');
    await buildShards(opts(out));
    const before = await contents(out);
    const manifest = await readComplete(out);
    // Another source (one more image), and the build fails halfway.
    const extra = join(src, 'train', 'n01440764', 'extra.JPEG');
    await writeFile(extra, await readFile(join(src, 'train', 'n01440764', 'n01440764_0.JPEG')));
    try {
      await expect(buildShards(opts(out, { onShardWritten: recorder({ split: 'train', at: 4 }).hook }))).rejects.toThrow();
      expect(await contents(out)).toEqual(before);
      expect(await readComplete(out)).toEqual(manifest);
      // A layout the builder refuses does not touch it either.
      await appendFile(join(src, 'val', 'stray.JPEG'), 'x');
      await expect(buildShards(opts(out))).rejects.toMatchObject({ kind: 'source-missing' });
      expect(await contents(out)).toEqual(before);
    } finally {
      await rm(extra, { force: true });
      await rm(join(src, 'val', 'stray.JPEG'), { force: true });
    }
  });
});

describe('ensureImagenet', () => {
  it('builds into the cache once, reuses it, and takes a folder of built shards as it is', async () => {
    quiet();
    const cacheDir = join(root, 'cache');
    const first = recorder();
    const a = await ensureImagenet({ src, size: 32, cacheDir, samplesPerShard: SHARD, progress: false, onShardWritten: first.hook });
    expect(a.built).toBe(true);
    expect(a.dir).toMatch(new RegExp(`^${cacheDir}/imagenet-32-[0-9a-f]{12}$`));
    expect(first.written).toHaveLength(trainShards + valShards);
    await expectSameFolder(a.dir, clean);
    const t = (await stat(join(a.dir, 'manifest.json'))).mtimeMs;
    const second = recorder();
    const b = await ensureImagenet({ src, size: 32, cacheDir, samplesPerShard: SHARD, progress: false, onShardWritten: second.hook });
    expect(b).toEqual({ ...a, built: false });
    expect(second.written).toEqual([]);
    expect((await stat(join(a.dir, 'manifest.json'))).mtimeMs).toBe(t);
    // Already-built shards as src.
    expect(await ensureImagenet({ src: a.dir, size: 32 })).toEqual({ manifest: a.manifest, dir: a.dir, built: false });
    await expect(ensureImagenet({ src: a.dir, size: 64 })).rejects.toThrow(/holds shards of 32x32 images, not 64x64: pass size 32/);
    // Other options into the same folder: rebuilt, not reused.
    const c = await ensureImagenet({ src, size: 32, cacheDir, samplesPerShard: 5, progress: false });
    expect([c.built, c.dir]).toEqual([true, a.dir]);
  });

  it('an interrupted ensureImagenet resumes on the next call', async () => {
    quiet();
    const out = join(root, 'ensure-out');
    const o = { src, size: 32, out, samplesPerShard: SHARD, progress: false };
    await expect(ensureImagenet({ ...o, onShardWritten: recorder({ split: 'train', at: 5 }).hook })).rejects.toThrow();
    const second = recorder();
    expect((await ensureImagenet({ ...o, onShardWritten: second.hook })).built).toBe(true);
    expect(second.written).toHaveLength(trainShards + valShards - 6);
    await expectSameFolder(out, clean);
  });
});
