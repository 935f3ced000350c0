// One coordinator per job folder (coordinator/job-lock.ts): a second one is refused before it
// touches anything, a stale lock (its process gone, or the pid reused) is taken over, and
// runJob takes and gives back the lock.
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  acquireJobLock, assertJobFolderFree, JobFolderInUseError, jobFolderOwner, LOCK_FILE, ownerState, parseOwner, selfOwner, type LockOwner,
} from '../../coordinator/job-lock.ts';
import { JobFolderError } from '../../coordinator/run.ts';
import { buildTestData, startTestJob, tempRoot } from '../../testbed/jobs.ts';
import type { Manifest } from '../../src/data/manifest.ts';

const ROOT = join(dirname(new URL(import.meta.url).pathname), '../..');

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '0']);
  if (r.pid === undefined) throw new Error('could not start a process');
  return r.pid;
}

const writeLock = (dir: string, owner: LockOwner | string) => writeFile(join(dir, LOCK_FILE), typeof owner === 'string' ? owner : `${JSON.stringify(owner)}\n`);

describe('job folder lock', () => {
  let root: { dir: string; remove(): Promise<void> };
  let n = 0;
  const fresh = async () => {
    const dir = join(root.dir, `f${n++}`);
    await mkdir(dir, { recursive: true });
    return dir;
  };
  beforeAll(async () => { root = await tempRoot('lock-'); });
  afterAll(async () => { await root.remove(); });

  it('is taken once: a second taker is refused with the holder and what to do, until it is released', async () => {
    const dir = await fresh();
    const lines: string[] = [];
    const a = await acquireJobLock(dir, (l) => lines.push(l));
    expect(parseOwner(await readFile(join(dir, LOCK_FILE), 'utf8'))).toEqual(a.owner);
    expect(a.owner.pid).toBe(process.pid);
    const refused = await acquireJobLock(dir, (l) => lines.push(l)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(JobFolderInUseError);
    expect((refused as Error).message).toMatch(
      new RegExp(`${dir} is in use by another coordinator \\(process ${process.pid} on this machine, since .*\\): stop it first .*--job-dir`),
    );
    expect((refused as Error).message).toMatch(/Nothing in the folder was touched/);
    await expect(assertJobFolderFree(dir)).rejects.toThrow(/in use by another coordinator/);
    expect(await jobFolderOwner(dir)).toEqual(a.owner);
    await a.release();
    await a.release(); // idempotent
    await expect(stat(join(dir, LOCK_FILE))).rejects.toThrow(/ENOENT/);
    expect(await jobFolderOwner(dir)).toBeNull();
    const b = await acquireJobLock(dir, (l) => lines.push(l));
    await b.release();
    expect(lines).toEqual([]);
  });

  it('a lock whose process is gone, or unreadable, is taken over with a line saying so', async () => {
    const dir = await fresh();
    const gone = deadPid();
    await writeLock(dir, { pid: gone, host: hostname(), since: '2026-01-01T00:00:00.000Z' });
    expect(ownerState({ pid: gone, host: hostname(), since: 'x' })).toBe('gone');
    expect(await jobFolderOwner(dir)).toBeNull();
    await assertJobFolderFree(dir);
    const lines: string[] = [];
    const a = await acquireJobLock(dir, (l) => lines.push(l));
    expect(a.owner.pid).toBe(process.pid);
    expect(lines.join('\n')).toMatch(new RegExp(`the lock of coordinator process ${gone} .* is stale, that process is gone: taking the job over`));
    await a.release();
    for (const junk of ['', '{"pid":', '[]', '{"pid":-1,"host":"h","since":"s"}']) {
      await writeLock(dir, junk);
      const got: string[] = [];
      const b = await acquireJobLock(dir, (l) => got.push(l));
      expect(got.join('\n'), JSON.stringify(junk)).toMatch(/unreadable .*taking the job over/);
      await b.release();
    }
    // Nothing of the stale locks is left beside the folder's files.
    expect((await readdir(dir)).filter((f) => f.startsWith(LOCK_FILE))).toEqual([]);
  });

  it.runIf(process.platform === 'linux')('a live pid that is not the lock\'s process (another start time, or another boot) ' +
    'does not hold the folder', async () => {
    const me = selfOwner();
    expect(me.start).toMatch(/^\d+$/);
    expect(ownerState(me)).toBe('alive');
    expect(ownerState({ ...me, start: String(Number(me.start) + 1) })).toBe('gone');
    expect(ownerState({ ...me, boot: '00000000-0000-0000-0000-000000000000' })).toBe('gone');
    const dir = await fresh();
    await writeLock(dir, { ...me, start: String(Number(me.start) + 1) });
    const lines: string[] = [];
    const a = await acquireJobLock(dir, (l) => lines.push(l));
    expect(lines.join('\n')).toMatch(/is stale/);
    await a.release();
  });

  it("npm start on a folder in use stops before --fresh would move it away, and says who holds it", async () => {
    const dir = await fresh();
    await writeFile(join(dir, 'job.json'), `${JSON.stringify({ jobId: 7, config: { name: 'held' } })}\n`);
    const held = await acquireJobLock(dir, () => undefined);
    try {
      const child = spawn(process.execPath, [
        '--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'coordinator/cli.ts', 'start', '--job-dir', dir, '--fresh', '--volunteers', '0',
        '--port', '0',
      ], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
      clearTimeout(timer);
      expect(code, err).toBe(1);
      expect(err).toContain(`${dir} is in use by another coordinator (process ${process.pid} on this machine`);
      // Not moved aside, nothing written: the folder holds what it held.
      expect((await readdir(dir)).sort()).toEqual(['coordinator.lock', 'job.json']);
      expect((await readdir(dirname(dir))).filter((f) => f.startsWith(`${dir.split('/').pop()!}-`))).toEqual([]);
    } finally {
      await held.release();
    }
  }, 90_000);

  it("another machine's lock is not taken over: the message says which file to remove if it is not running", async () => {
    const dir = await fresh();
    const other: LockOwner = { pid: 4242, host: `${hostname()}-elsewhere`, since: '2026-01-01T00:00:00.000Z' };
    expect(ownerState(other)).toBe('unknown');
    await writeLock(dir, other);
    const e = await acquireJobLock(dir, () => undefined).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(JobFolderInUseError);
    expect((e as Error).message).toContain(`process 4242 on ${other.host}`);
    expect((e as Error).message).toContain(`if it is not running any more, remove ${join(dir, LOCK_FILE)}`);
    expect(parseOwner(await readFile(join(dir, LOCK_FILE), 'utf8'))).toEqual(other);
  });
});

describe('runJob and the lock', () => {
  let root: { dir: string; remove(): Promise<void> };
  let data: { dataDir: string; manifest: Manifest };
  beforeAll(async () => {
    root = await tempRoot('lockjob-');
    data = await buildTestData(root.dir);
  });
  afterAll(async () => { await root.remove(); });
  const config = {
    name: 'locked', model: 'tiny-cnn', dataset: 'synthetic', globalBatch: 8, steps: 4, optimizer: { kind: 'lars', lr: 0.1 }, evalEvery: 0, checkpointEvery: 2,
    seed: 3, minPeers: 1,
  };

  it('a second coordinator on a running job folder is refused and touches nothing: not a checkpoint write in flight, not the metrics', async () => {
    const first = await startTestJob(root.dir, 'job', data, { ...config, dataset: data.manifest.dataset });
    try {
      expect(first.resumed).toBe(false);
      // A checkpoint write of the running coordinator, in flight (the store's temporary name).
      const inFlight = join(first.jobDir, 'checkpoints', `.step-0000000002.vtck.tmp-${process.pid}-abcd1234`);
      await writeFile(inFlight, 'half a checkpoint');
      const metricsBefore = await readFile(join(first.jobDir, 'metrics.jsonl'), 'utf8').catch(() => '');
      const second = await startTestJob(root.dir, 'job', data, { ...config, dataset: data.manifest.dataset }).catch((e: unknown) => e);
      expect(second).toBeInstanceOf(JobFolderInUseError);
      expect(second).not.toBeInstanceOf(JobFolderError);
      expect((second as Error).message).toMatch(/is in use by another coordinator \(process \d+ on this machine/);
      expect(await readFile(inFlight, 'utf8')).toBe('half a checkpoint');
      expect(await readFile(join(first.jobDir, 'metrics.jsonl'), 'utf8').catch(() => '')).toBe(metricsBefore);
      expect(parseOwner(await readFile(join(first.jobDir, LOCK_FILE), 'utf8'))?.pid).toBe(process.pid);
    } finally {
      await first.close();
    }
    // Closed: the lock is given back, and the next coordinator resumes the job.
    await expect(stat(join(first.jobDir, LOCK_FILE))).rejects.toThrow(/ENOENT/);
    const again = await startTestJob(root.dir, 'job', data, { ...config, dataset: data.manifest.dataset });
    try {
      expect(again.resumed).toBe(true);
    } finally {
      await again.close();
    }
    await expect(stat(join(first.jobDir, LOCK_FILE))).rejects.toThrow(/ENOENT/);
  });

  it('a start that fails (a folder holding another job) gives the lock back', async () => {
    const a = await startTestJob(root.dir, 'other', data, { ...config, dataset: data.manifest.dataset });
    await a.close();
    const e = await startTestJob(root.dir, 'other', data, { ...config, dataset: data.manifest.dataset, seed: 4 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(JobFolderError);
    await expect(stat(join(a.jobDir, LOCK_FILE))).rejects.toThrow(/ENOENT/);
  });
});
