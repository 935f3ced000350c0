// The multi-host scenario shared by the test and `npm run bench -- network`: a coordinator
// (with STUN, a real coturn and its local CA) on one host of a test bed, Node volunteers on
// other hosts and one behind a NAT that lets it reach only the coordinator's host, each a
// real process inside its host's namespace.
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, spawnVolunteer, type LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import type { LiveEvent } from '../../src/protocol/messages.ts';
import type { Testbed } from './bed.ts';

export interface CoordinatorProc {
  readonly url: string;
  readonly port: number;
  readonly events: { at: number; e: LiveEvent }[];
  readonly lines: string[];
  readonly finished: Promise<void>;
  /** Resolves with the first event (after `since`) that `pred` accepts; rejects after `ms`. */
  waitFor(pred: (e: LiveEvent) => boolean, ms: number, what: string, since?: number): Promise<{ at: number; e: LiveEvent }>;
  stop(): Promise<void>;
}

export interface CoordinatorProcOptions {
  jobDir: string;
  dataDir: string;
  dataset: string;
  config: Record<string, unknown>;
  port: number;
  turn?: { port: number; relayPorts: [number, number] };
  pageDir?: string;
  tlsDir?: string;
  timeouts?: Record<string, number>;
  heartbeatMs?: number;
  /** Test images of each evaluation (default 48). */
  evalSamples?: number;
  /** Test images of the evaluation at the job's end (default: evalSamples). */
  finalEvalSamples?: number;
}

/** Starts testbed/net/coordinator-proc.ts inside `host`; resolves once it listens. */
export async function startCoordinatorIn(bed: Testbed, host: string, o: CoordinatorProcOptions): Promise<CoordinatorProc> {
  const child: ChildProcess = bed.spawn(
    host, process.execPath, ['--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'testbed/net/coordinator-proc.ts', JSON.stringify(o)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const events: { at: number; e: LiveEvent }[] = [];
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let ready: (v: { url: string; port: number }) => void = () => undefined;
  let done: () => void = () => undefined;
  const readyP = new Promise<{ url: string; port: number }>((r) => { ready = r; });
  const finished = new Promise<void>((r) => { done = r; });
  let partial = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      if (!line.trim()) continue;
      const m = JSON.parse(line) as { event?: LiveEvent; ready?: { url: string; port: number }; finished?: unknown };
      if (m.event) { events.push({ at: Date.now(), e: m.event }); for (const w of waiters) w(); }
      if (m.ready) ready(m.ready);
      if (m.finished) done();
    }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => { for (const l of chunk.split('\n')) if (l.trim()) { lines.push(l); if (lines.length > 3000) lines.shift(); } });
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const first = await Promise.race([readyP, exited.then((c) => {
    throw new Error(`the coordinator process exited (${c}) before listening:\n${lines.slice(-20).join('\n')}`);
  })]);
  return {
    url: first.url, port: first.port, events, lines, finished,
    waitFor(pred, ms, what, since = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = events.find((x) => x.at >= since && pred(x.e));
          if (hit) { waiters.delete(check); clearTimeout(t); resolve(hit); }
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out after ${ms} ms waiting for ${what}; last lines:\n${lines.slice(-15).join('\n')}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    async stop() {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    },
  };
}

/** A headless volunteer (`npm run volunteer`) inside `host` of the test bed, named after it unless `name` says otherwise. */
export function volunteerIn(bed: Testbed, host: string, url: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}, name = host): LocalVolunteer {
  return spawnVolunteer({
    // A main thread stuck for 15 s is reported with its stacks (stall-watch.ts): far above a step's compute here.
    url, name, args: ['--backend', 'wasm', '--rejoin-for', '60', ...extra], env: { VT_STALL_REPORT_S: '15', ...env },
    launch: (cmd, args, opts) => bed.spawn(host, cmd, args, opts),
  });
}

export const jobDirOf = (root: string, name: string): string => join(root, name);

/** What firefox-donor.ts printed: one event per line. */
export type FirefoxEvent = Record<string, unknown> & { event: string };

export interface FirefoxDonor {
  /** Every line the driver printed (events as JSON, and its stderr). */
  readonly lines: string[];
  /** Firefox's version once launched. */
  readonly version: string | null;
  /** The first event (so far or to come) that `pred` accepts; rejects after `ms`, or at once when the driver reports an error or exits. */
  next(pred: (e: FirefoxEvent) => boolean, ms: number, what: string): Promise<FirefoxEvent>;
  stop(): Promise<void>;
}

/** A stock Firefox donating from the page at `url` (testbed/net/firefox-donor.ts) inside `host`, trusting `caFile`. */
export function firefoxIn(bed: Testbed, host: string, url: string, caFile: string, name: string): FirefoxDonor {
  const args = ['--import', 'tsx', join(ROOT, 'testbed/net/firefox-donor.ts'), '--url', url, '--ca', caFile, '--name', name, '--backend', 'wasm'];
  const child = bed.spawn(host, process.execPath, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const events: FirefoxEvent[] = [];
  const waiters = new Set<() => void>();
  let exited = false;
  const take = (chunk: string, json: boolean) => {
    for (const l of chunk.split('\n')) {
      if (!l.trim()) continue;
      lines.push(l);
      if (lines.length > 2000) lines.shift();
      if (!json) continue;
      try {
        events.push(JSON.parse(l) as FirefoxEvent);
      } catch { /* not an event */ }
    }
    for (const w of [...waiters]) w();
  };
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    const parts = (partial + c).split('\n');
    partial = parts.pop() ?? '';
    take(parts.join('\n'), true);
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => take(c, false));
  const gone = new Promise<void>((r) => child.once('exit', () => { exited = true; for (const w of [...waiters]) w(); r(); }));
  return {
    lines,
    get version() {
      const v = events.find((e) => e.event === 'launched')?.version;
      return typeof v === 'string' ? v : null;
    },
    next(pred, ms, what) {
      return new Promise((resolve, reject) => {
        const fail = (why: string) => {
          waiters.delete(check);
          clearTimeout(t);
          reject(new Error(`Firefox: ${why} waiting for ${what}; last lines:\n${lines.slice(-15).join('\n')}`));
        };
        const check = () => {
          const hit = events.find(pred);
          if (hit) { waiters.delete(check); clearTimeout(t); resolve(hit); return; }
          const err = events.find((e) => e.event === 'error');
          if (err) fail(`the driver failed (${String(err.message)})`);
          else if (exited) fail('the driver exited');
        };
        const t = setTimeout(() => fail(`timed out after ${ms} ms`), ms);
        waiters.add(check);
        check();
      });
    },
    async stop() {
      if (!exited) child.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 10_000))]);
      if (!exited && child.pid) try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
    },
  };
}
