// Atomic file and folder writes: write a temporary name, then rename. A reader never sees a
// half-written shard or manifest under its final name.

import { randomBytes } from 'node:crypto';
import { open, readdir, type FileHandle, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export const tmpSuffix = (): string => `.partial-${process.pid}-${randomBytes(4).toString('hex')}`;

/** Whether process `pid` is running (a lock or a partial build of a dead process may be taken over). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes `<path>.partial-<pid>-*` left beside `path` by builds whose process has died. */
export async function removeStalePartials(path: string): Promise<string[]> {
  const dir = dirname(path);
  if (!(await exists(dir))) return [];
  const prefix = `${basename(path)}.partial-`;
  const removed: string[] = [];
  for (const name of await readdir(dir)) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split('-')[0]);
    if (Number.isInteger(pid) && pid !== process.pid && !alive(pid)) {
      await rm(join(dir, name), { recursive: true, force: true });
      removed.push(name);
    }
  }
  return removed;
}

/**
 * Writes `path` through a temporary name. With `durable`, the data is fsync'd before the
 * rename and the folder after it, so a power loss leaves the old file or the whole new one.
 * `mode`: the new file's permissions (default 0o666 less the umask).
 */
export async function writeFileAtomic(path: string, data: Uint8Array | string, durable = false, mode = 0o666): Promise<void> {
  const tmp = path + tmpSuffix();
  try {
    if (durable) {
      const f = await open(tmp, 'w', mode);
      try {
        await f.writeFile(data);
        await f.sync();
      } finally {
        await f.close();
      }
    } else {
      await writeFile(tmp, data, { mode });
    }
    await rename(tmp, path);
    if (durable) await syncDir(dirname(path));
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/** fsync of a folder (its entries: renames, new files). A no-op where the platform refuses it. */
export async function syncDir(dir: string): Promise<void> {
  let f: FileHandle | undefined;
  try {
    f = await open(dir, 'r');
    await f.sync();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL' && code !== 'EBADF') throw e;
  } finally {
    await f?.close();
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

/** Moves the finished folder `tmp` to `dir`, replacing an older `dir` (old one removed after). */
export async function replaceDir(tmp: string, dir: string): Promise<void> {
  const old = dir + tmpSuffix();
  const hadOld = await exists(dir);
  if (hadOld) await rename(dir, old);
  await rename(tmp, dir);
  await syncDir(dirname(dir));
  if (hadOld) await rm(old, { recursive: true, force: true });
}
