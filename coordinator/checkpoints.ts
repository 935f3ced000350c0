// A job's checkpoint folder: `step-<step>.vtck` files (format: src/checkpoint/format.ts).
//
// - Writes are atomic: a temporary name, fsync, rename, fsync of the folder. A crash leaves at
//   worst a temporary file (removed when the store opens), never a half file under a final name.
// - Old checkpoints are pruned only after a new one is safely in place, so a failed write
//   never costs a good checkpoint; the newest `keep` are kept.
// - Reads verify length and sha256; a damaged newest checkpoint is skipped with a logged
//   reason and the previous one is used.
// One coordinator process writes a folder; temporary files found at open are from a crash.
import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { CheckpointError, decodeCheckpoint, encodeCheckpoint, type Checkpoint } from '../src/checkpoint/format.ts';

export { CheckpointError, layoutFingerprint, type Checkpoint } from '../src/checkpoint/format.ts';

const NAME = /^step-(\d{10})\.vtck$/;
const TMP = /^\.step-\d{10}\.vtck\.tmp-/;
const fileName = (step: number): string => `step-${String(step).padStart(10, '0')}.vtck`;

export interface StoredCheckpoint {
  step: number;
  path: string;
}

export interface CheckpointStore {
  readonly dir: string;
  /** Writes atomically, then prunes to the newest `keep`. Resolves once it is durable. */
  write(c: Checkpoint): Promise<StoredCheckpoint>;
  /** Checkpoint files by step, newest first (not verified). */
  list(): Promise<StoredCheckpoint[]>;
  /** The newest checkpoint that verifies, or null; damaged newer ones are logged and skipped. */
  readNewest(): Promise<(Checkpoint & { path: string }) | null>;
  /** The same checkpoint as the verified file's bytes (what peers download). */
  readNewestFile(): Promise<(StoredCheckpoint & { bytes: Uint8Array }) | null>;
  /** The verified bytes of the checkpoint of `step`, or null when there is none (or it is damaged). */
  readStepFile(step: number): Promise<(StoredCheckpoint & { bytes: Uint8Array }) | null>;
  /** Removes the checkpoints after `step` (work undone: coordinator/undo.ts); resolves with their steps once the folder is synced. */
  discardAfter(step: number): Promise<number[]>;
}

export interface StoreOptions {
  keep: number;
  /** Where skipped checkpoints and removed temporary files are reported. */
  log?: (line: string) => void;
}

export async function openCheckpointStore(dir: string, o: StoreOptions): Promise<CheckpointStore> {
  if (!Number.isInteger(o.keep) || o.keep < 1) throw new RangeError(`keep must be an integer >= 1, got ${o.keep}`);
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  await mkdir(dir, { recursive: true });
  for (const name of await readdir(dir)) {
    if (!TMP.test(name)) continue;
    await rm(join(dir, name), { force: true });
    log(`checkpoints: removed ${name}, left by a write that did not finish`);
  }

  const list = async (): Promise<StoredCheckpoint[]> => {
    const found: StoredCheckpoint[] = [];
    for (const name of await readdir(dir)) {
      const m = NAME.exec(name);
      if (m) found.push({ step: Number(m[1]), path: join(dir, name) });
    }
    return found.sort((a, b) => b.step - a.step);
  };

  const syncDir = async (): Promise<void> => {
    const h = await open(dir, 'r');
    try {
      await h.sync();
    } finally {
      await h.close();
    }
  };

  return {
    dir,
    list,
    async write(c) {
      if (!Number.isInteger(c.step) || c.step < 0 || c.step > 9_999_999_999) {
        throw new RangeError(`checkpoint step must be an integer in [0, 9999999999], got ${c.step}`);
      }
      const final = join(dir, fileName(c.step));
      const tmp = join(dir, `.${fileName(c.step)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
      const h = await open(tmp, 'wx');
      try {
        for (const chunk of encodeCheckpoint(c)) await h.write(chunk);
        await h.sync();
      } catch (e) {
        await h.close();
        await rm(tmp, { force: true });
        throw e;
      }
      await h.close();
      try {
        await rename(tmp, final);
      } catch (e) {
        await rm(tmp, { force: true });
        throw e;
      }
      await syncDir();
      for (const old of (await list()).slice(o.keep)) await rm(old.path, { force: true });
      return { step: c.step, path: final };
    },
    async readNewest() {
      const found = await newestVerified();
      return found && { ...found.checkpoint, path: found.path };
    },
    async readNewestFile() {
      const found = await newestVerified();
      return found && { step: found.step, path: found.path, bytes: found.bytes };
    },
    async readStepFile(step) {
      if (!Number.isInteger(step) || step < 0 || step > 9_999_999_999) return null;
      const found = await newestVerified([{ step, path: join(dir, fileName(step)) }]);
      return found && { step: found.step, path: found.path, bytes: found.bytes };
    },
    async discardAfter(step) {
      const later = (await list()).filter((c) => c.step > step);
      for (const c of later) await rm(c.path, { force: true });
      if (later.length) await syncDir();
      return later.map((c) => c.step).sort((a, b) => a - b);
    },
  };

  async function newestVerified(candidates?: StoredCheckpoint[]): Promise<(StoredCheckpoint & { bytes: Uint8Array; checkpoint: Checkpoint }) | null> {
    for (const s of candidates ?? (await list())) {
      const bytes = await readFile(s.path).catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return null; // pruned by a write since list(): try the next
        throw e;
      });
      if (!bytes) continue;
      try {
        return { ...s, bytes, checkpoint: decodeCheckpoint(bytes, s.path) };
      } catch (e) {
        if (!(e instanceof CheckpointError)) throw e;
        log(`checkpoints: ${e.message}`);
      }
    }
    return null;
  }
}
