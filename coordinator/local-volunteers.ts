// Headless volunteers as child processes of this machine (npm start --volunteers N, tests,
// benchmarks): each is `npm run volunteer` in its own process, with its own GPU device and
// WebRTC stack, exactly as on a lab desktop.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FOLLOW_STARTER_ENV, RESTARTED_AFTER_DEADLOCK } from '../src/client/supervise.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface LocalVolunteer {
  readonly name: string;
  readonly child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
  /** Every stderr line so far (bounded to the last 2,000). */
  readonly lines: string[];
  /** How many times its parent started it again after node-datachannel's own deadlock (src/client/supervise.ts), so far. */
  readonly deadlockRestarts: number;
  /**
   * Sends `signal` (default SIGTERM: the volunteer leaves after its step). SIGINT and SIGTERM go to
   * the volunteer's parent, which passes them on (src/client/supervise.ts); any other signal (a
   * test's SIGKILL, a crash) goes to the volunteer itself first, then to its parent, so that it
   * stops where it is, as a crashed process does.
   */
  kill(signal?: NodeJS.Signals): void;
}

export interface SpawnOptions {
  url: string;
  name: string;
  token?: string;
  /** Extra volunteer options, e.g. ['--no-tune']. */
  args?: string[];
  /** Each stderr line as it comes (npm start prints them prefixed). */
  onLine?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
  /** How to start the process (default child_process.spawn; the test bed starts it inside a host). */
  launch?: (cmd: string, args: string[], opts: { cwd: string; stdio: ['ignore', 'pipe', 'pipe']; env: NodeJS.ProcessEnv }) => ChildProcess;
}

export function spawnVolunteer(o: SpawnOptions): LocalVolunteer {
  const args = [
    '--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'src/client/node-cli.ts', '--url', o.url, '--name', o.name,
    ...(o.token ? ['--token', o.token] : []), ...(o.args ?? []),
  ];
  // FOLLOW_STARTER_ENV: the volunteer ends when this process is gone, also when it is killed outright (supervise.ts).
  const env = { ...process.env, [FOLLOW_STARTER_ENV]: '1', ...o.env };
  const child = (o.launch ?? spawn)(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env });
  const lines: string[] = [];
  let deadlockRestarts = 0;
  let partial = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      lines.push(line);
      if (lines.length > 2000) lines.shift();
      if (line.startsWith(RESTARTED_AFTER_DEADLOCK)) deadlockRestarts += 1;
      o.onLine?.(line);
    }
  });
  child.stdout!.resume();
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const kill = (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    if (signal !== 'SIGTERM' && signal !== 'SIGINT' && child.pid !== undefined) {
      for (const pid of descendants(child.pid).reverse()) try { process.kill(pid, signal); } catch { /* gone already */ }
    }
    child.kill(signal);
  };
  return {
    name: o.name, child, exited, lines, kill,
    get deadlockRestarts() {
      return deadlockRestarts;
    },
  };
}

/** Every process below `pid` (Linux /proc; none elsewhere), parents before their children. */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  let kids: number[] = [];
  try {
    kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return out;
  }
  for (const k of kids) out.push(k, ...descendants(k));
  return out;
}
