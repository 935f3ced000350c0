// The state of a build in progress, kept in its temporary folder (<out>.building): which
// shards are complete (each with the source position after its last sample, its statistics
// and its report lines), the source's fingerprint and the options. Rewritten atomically and
// fsync'd after every shard, so a build killed at any moment (Ctrl-C, kill -9, power loss)
// resumes after its last recorded shard. A different source or options starts over.
// A lock file holds the pid of the build writing the folder: two builds never share one.

import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { DataError } from '../../src/data/errors.ts';
import { SPLITS, type ShardInfo, type SplitName } from '../../src/data/manifest.ts';
import { sameKey, type BuildKey, type ReportEntry } from './build-report.ts';
import { alive, exists, writeFileAtomic } from './files.ts';
import type { StatSums } from './shard-stats.ts';

export const STATE_FILE = 'build-state.json';
export const LOCK_FILE = 'build.lock';

export interface JournalShard {
  readonly info: ShardInfo;
  /** Source position after the shard's last sample: where the next shard's reading starts. */
  readonly end: number;
  /** Train shards only. */
  readonly stats: StatSums | null;
  /** Converted and skipped files since the previous shard. */
  readonly report: readonly ReportEntry[];
}

export interface SplitState {
  readonly shards: JournalShard[];
  /** Set when the split's list was read to its end: the report lines after its last shard. */
  finished: { readonly report: readonly ReportEntry[] } | null;
}

interface StateFile {
  readonly format: 'vt-build-state';
  readonly version: 1;
  readonly fingerprint: string;
  readonly options: BuildKey;
  readonly splits: Record<SplitName, SplitState>;
}

const fresh = (fingerprint: string, options: BuildKey): StateFile => ({
  format: 'vt-build-state',
  version: 1,
  fingerprint,
  options,
  splits: { train: { shards: [], finished: null }, val: { shards: [], finished: null } },
});

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The state file's contents when it belongs to this source and options, else null (with why). */
function parseState(json: unknown, fingerprint: string, options: BuildKey): { state: StateFile | null; why: string } {
  if (!isObj(json) || json.format !== 'vt-build-state' || json.version !== 1) return { state: null, why: 'its state file is from another version' };
  if (json.fingerprint !== fingerprint) return { state: null, why: 'the source folder changed (files added, removed or resized)' };
  if (!isObj(json.options) || !sameKey(json.options as BuildKey, options)) {
    return { state: null, why: `the options changed (was ${JSON.stringify(json.options)})` };
  }
  const splits = json.splits;
  const ok = isObj(splits) && SPLITS.every((s) => isObj(splits[s]) && Array.isArray((splits[s] as Obj).shards));
  if (!ok) return { state: null, why: 'its state file is damaged' };
  return { state: json as unknown as StateFile, why: '' };
}

export class BuildJournal {
  private constructor(
    private readonly dir: string,
    private readonly state: StateFile,
  ) {}

  /**
   * Opens the journal of `dir` (created by the caller). Keeps what an earlier build of the same
   * source and options completed and whose shard files are still whole; otherwise empties `dir`.
   */
  static async open(dir: string, fingerprint: string, options: BuildKey, say: (line: string) => void): Promise<BuildJournal> {
    const path = join(dir, STATE_FILE);
    let state: StateFile | null = null;
    if (await exists(path)) {
      let json: unknown = null;
      try {
        json = JSON.parse(await readFile(path, 'utf8')) as unknown;
      } catch (e) {
        if (!(e instanceof SyntaxError)) throw e;
      }
      const parsed = parseState(json, fingerprint, options);
      state = parsed.state;
      if (!state) say(`data: starting ${dir} over: ${parsed.why}`);
    }
    if (state) {
      for (const split of SPLITS) await keepWholeShards(dir, state.splits[split]);
    }
    // Left-overs: a shard or state file cut off mid-write, or (starting over) everything but the lock.
    for (const name of await readdir(dir)) {
      if (name === LOCK_FILE) continue;
      if (!state || name.includes('.partial-')) await rm(join(dir, name), { recursive: true, force: true });
    }
    const journal = new BuildJournal(dir, state ?? fresh(fingerprint, options));
    if (!state) await journal.save();
    return journal;
  }

  split(split: SplitName): SplitState {
    return this.state.splits[split];
  }

  /** Shards kept from earlier runs and written in this one. */
  shardCount(): number {
    return SPLITS.reduce((n, s) => n + this.state.splits[s].shards.length, 0);
  }

  async shardDone(split: SplitName, shard: JournalShard): Promise<void> {
    this.state.splits[split].shards.push(shard);
    await this.save();
  }

  async splitDone(split: SplitName, report: readonly ReportEntry[]): Promise<void> {
    this.state.splits[split].finished = { report };
    await this.save();
  }

  async remove(): Promise<void> {
    await rm(join(this.dir, STATE_FILE), { force: true });
  }

  private save(): Promise<void> {
    return writeFileAtomic(join(this.dir, STATE_FILE), JSON.stringify(this.state), true);
  }
}

/** Drops recorded shards from the first one whose file is missing or has another size. */
async function keepWholeShards(dir: string, s: SplitState): Promise<void> {
  for (let i = 0; i < s.shards.length; i++) {
    const path = join(dir, s.shards[i].info.file);
    if (!(await exists(path)) || (await stat(path)).size !== s.shards[i].info.bytes) {
      s.shards.splice(i);
      s.finished = null;
      return;
    }
  }
}

/** Takes `dir`'s lock (a dead holder's lock is taken over); returns its release. */
export async function takeLock(dir: string): Promise<() => Promise<void>> {
  const path = join(dir, LOCK_FILE);
  const me = `${process.pid} ${hostname()}`;
  try {
    await writeFile(path, me, { flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const [pid, host] = (await readFile(path, 'utf8')).split(' ');
    if (host === hostname() && Number(pid) !== process.pid && alive(Number(pid))) {
      throw new DataError(
        'bad-input',
        `another build (pid ${pid}) is writing ${dir}: wait for it to finish or stop it (if no build is running, delete ${path})`,
      );
    }
    await writeFile(path, me);
  }
  return () => rm(path, { force: true });
}
