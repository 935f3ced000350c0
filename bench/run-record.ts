// `npm run bench -- NAME ... --record`: the bench's summary (its last line) kept in git, with
// what it ran on: docs/results/NAME.json holds every recorded run, newest last, each with the
// arguments, the date, the commit (and whether the tree had changes), the machine and the
// summary. A figure in the README or docs/ then names the run behind it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';

export interface RecordedRun {
  date: string;
  args: string[];
  commit: string | null;
  /** The working tree had uncommitted changes when it ran. */
  dirty: boolean | null;
  machine: { cpu: string; cores: number; memoryGiB: number; platform: string; node: string };
  seconds: number;
  summary: unknown;
}

/** The last non-empty line of `out`, parsed as JSON; null when it is none. */
export function lastJsonLine(out: string): unknown {
  const last = out.split('\n').map((l) => l.trim()).filter((l) => l.length > 0).pop();
  if (last === undefined) return null;
  try {
    return JSON.parse(last) as unknown;
  } catch {
    return null;
  }
}

function git(root: string, args: string[]): string | null {
  try {
    return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  } catch {
    return null;
  }
}

/** One run's record (the summary is the bench's last line). */
export function recordOf(root: string, args: string[], seconds: number, summary: unknown, now = new Date()): RecordedRun {
  const status = git(root, ['status', '--porcelain', '--untracked-files=no']);
  return {
    date: now.toISOString(), args, commit: git(root, ['rev-parse', 'HEAD']), dirty: status === null ? null : status.length > 0,
    machine: {
      cpu: cpus()[0]?.model ?? '?', cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30),
      platform: `${process.platform} ${process.arch}`, node: process.version,
    },
    seconds: Math.round(seconds), summary,
  };
}

/** Appends `run` to `file` (a JSON object { bench, runs: [...] }); a file that is not one is refused, never overwritten. */
export function appendRecord(file: string, bench: string, run: RecordedRun): number {
  let runs: RecordedRun[] = [];
  if (existsSync(file)) {
    const old = JSON.parse(readFileSync(file, 'utf8')) as { bench?: unknown; runs?: unknown };
    if (old.bench !== bench || !Array.isArray(old.runs)) throw new Error(`${file} is not a record of the ${bench} bench: move it away, then record again`);
    runs = old.runs as RecordedRun[];
  }
  runs.push(run);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ bench, runs }, null, 2)}\n`);
  return runs.length;
}

export const recordFile = (root: string, bench: string): string => join(root, 'docs', 'results', `${bench}.json`);
