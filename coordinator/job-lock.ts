// One coordinator per job folder. A second `npm start` on a folder that a running coordinator
// uses would append to the same metrics log, and opening the checkpoint store removes the
// temporary files of unfinished writes: the running coordinator's checkpoint in flight would be
// lost. So runJob takes `<jobDir>/coordinator.lock` first (created exclusively; it names the
// process) and close() gives it back. A lock whose process is gone (a crash, a kill -9, a
// reboot) is stale and taken over with a log line; on Linux a process that merely got the same
// pid is told apart by the boot id and the process's start time recorded in the lock.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const LOCK_FILE = 'coordinator.lock';

/** Who holds a job folder, as its lock file says. */
export interface LockOwner {
  pid: number;
  host: string;
  /** ISO time it was taken. */
  since: string;
  /** Linux: /proc/sys/kernel/random/boot_id when it was taken. */
  boot?: string;
  /** Linux: the process's start time (field 22 of /proc/<pid>/stat, clock ticks since boot). */
  start?: string;
}

export class JobFolderInUseError extends Error {
  readonly kind = 'job-folder-in-use';
  constructor(readonly jobDir: string, readonly owner: LockOwner, detail: string) {
    super(detail);
    this.name = 'JobFolderInUseError';
  }
}

export interface JobLock {
  readonly path: string;
  readonly owner: LockOwner;
  /** Removes the lock file if it is still this one (idempotent). */
  release(): Promise<void>;
}

const readProc = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** Field 22 (starttime) of /proc/<pid>/stat; fields are counted after the comm's last ')'. */
export function startTimeOf(pid: number): string | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return rest[19];
}

const bootId = (): string | undefined => readProc('/proc/sys/kernel/random/boot_id');

/** This process as a lock owner. */
export function selfOwner(now = new Date()): LockOwner {
  const boot = bootId();
  const start = startTimeOf(process.pid);
  return { pid: process.pid, host: hostname(), since: now.toISOString(), ...(boot ? { boot } : {}), ...(start ? { start } : {}) };
}

/** The lock's owner, or null when the text is not a lock (empty, cut off, edited). */
export function parseOwner(text: string): LockOwner | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  if (!Number.isInteger(o.pid) || (o.pid as number) <= 0 || typeof o.host !== 'string' || typeof o.since !== 'string') return null;
  const opt = (k: string) => (typeof o[k] === 'string' ? { [k]: o[k] as string } : {});
  return { pid: o.pid as number, host: o.host, since: o.since, ...opt('boot'), ...opt('start') };
}

/**
 * Whether the lock's process still runs: 'alive', 'gone', or 'unknown' (another machine's lock:
 * its process cannot be looked at from here).
 */
export function ownerState(owner: LockOwner): 'alive' | 'gone' | 'unknown' {
  if (owner.host !== hostname()) return 'unknown';
  try {
    process.kill(owner.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return 'gone';
    // EPERM: it exists, owned by another user.
  }
  const boot = bootId();
  if (owner.boot && boot && owner.boot !== boot) return 'gone';
  const start = startTimeOf(owner.pid);
  if (owner.start && start && owner.start !== start) return 'gone';
  return 'alive';
}

function inUse(jobDir: string, path: string, owner: LockOwner, state: 'alive' | 'unknown'): JobFolderInUseError {
  const who = `process ${owner.pid} on ${owner.host === hostname() ? 'this machine' : owner.host}, since ${owner.since}`;
  const what = state === 'alive'
    ? `stop it first (Ctrl-C in its terminal), or give this one another --job-dir`
    : `stop it first; if it is not running any more, remove ${path}`;
  return new JobFolderInUseError(jobDir, owner, `${jobDir} is in use by another coordinator (${who}): ${what}. Nothing in the folder was touched.`);
}

/** A lock file as found: its text, its owner (null: unreadable) and that owner's state; null when there is none. */
async function readLock(path: string): Promise<{ text: string; owner: LockOwner | null; state: 'alive' | 'gone' | 'unknown' } | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const owner = parseOwner(text);
  return { text, owner, state: owner ? ownerState(owner) : 'gone' };
}

/** `jobDir`'s lock when it names a live process or another machine's (the folder is held), else null. */
async function heldLock(jobDir: string): Promise<{ path: string; owner: LockOwner; state: 'alive' | 'unknown' } | null> {
  const path = join(jobDir, LOCK_FILE);
  const found = await readLock(path);
  if (!found?.owner || found.state === 'gone') return null;
  return { path, owner: found.owner, state: found.state };
}

/** The coordinator that holds `jobDir` now (its lock names a live process or another machine's), or null. */
export async function jobFolderOwner(jobDir: string): Promise<LockOwner | null> {
  return (await heldLock(jobDir))?.owner ?? null;
}

/** Throws JobFolderInUseError when another coordinator holds `jobDir` (before moving or writing anything in it). */
export async function assertJobFolderFree(jobDir: string): Promise<void> {
  const held = await heldLock(jobDir);
  if (held) throw inUse(jobDir, held.path, held.owner, held.state);
}

/**
 * Takes `jobDir`'s lock (the folder must exist). A stale lock (its process gone, or unreadable)
 * is moved aside and removed, then the lock is taken as if there had been none; a lock moved
 * aside that turns out not to be the stale one read (another coordinator took it meanwhile) is
 * put back, and this one gives way.
 */
export async function acquireJobLock(jobDir: string, log: (line: string) => void): Promise<JobLock> {
  const path = join(jobDir, LOCK_FILE);
  const owner = selfOwner();
  const text = `${JSON.stringify(owner)}\n`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const h = await open(path, 'wx', 0o644);
      try {
        await h.writeFile(text);
        await h.sync();
      } finally {
        await h.close();
      }
      return { path, owner, release: () => releaseLock(path, text) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const found = await readLock(path);
    if (!found) continue; // released meanwhile
    const { text: seen, owner: held, state } = found;
    if (held && state !== 'gone') throw inUse(jobDir, path, held, state);
    const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      await rename(path, aside);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw e;
    }
    if ((await readFile(aside, 'utf8')) !== seen) {
      // Not the lock read above: another coordinator's, taken in between. Its lock goes back.
      await rename(aside, path);
      const other = parseOwner(await readFile(path, 'utf8'));
      throw inUse(jobDir, path, other ?? { pid: 0, host: '?', since: '?' }, 'alive');
    }
    await rm(aside, { force: true });
    log(held
      ? `${jobDir}: the lock of coordinator process ${held.pid} (since ${held.since}) is stale, that process is gone: taking the job over`
      : `${jobDir}: ${LOCK_FILE} was unreadable (a start cut short): taking the job over`);
  }
  throw new JobFolderInUseError(
    jobDir, { pid: 0, host: '?', since: '?' },
    `${jobDir}: could not take ${path} (other coordinators kept taking it): start one coordinator per job folder`,
  );
}

async function releaseLock(path: string, text: string): Promise<void> {
  try {
    if ((await readFile(path, 'utf8')) === text) await rm(path, { force: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}
