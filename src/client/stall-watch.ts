// Node volunteers: a watchdog thread that notices when the main thread stops running (a native
// call that never returns, e.g. a WebRTC library waiting on itself) and writes what every thread
// of the process is doing (gdb's stacks) to stderr, where the volunteer's log goes. A volunteer
// whose event loop blocks sends no more heartbeats and is evicted; without this its log would
// just stop, and the cause would be lost.
//
// The main thread writes the time of its tick into shared memory every TICK_MS; the watchdog (a
// worker thread, so it runs while the main thread is stuck) reads it every second. A stall longer
// than `reportAfterMs` is reported once (the stacks, written straight to fd 2: a worker's
// process.stderr goes through the main thread, which is the one stuck); when the main thread
// ticks again, how long it lasted. Both lengths come from the main thread's own tick times (the
// first one measured before gdb runs): a watchdog slowed by a loaded machine, or blocked in gdb
// itself, does not lengthen them.
// A step's compute blocks the main thread too (wasm runs on it): the bound is far above any
// micro-batch (they are cut to fit the device) so that a report means a hang.
//
// One hang has a known cause and no way out: the main thread waiting on a lock inside
// node-datachannel that two of its own threads hold against each other (libdatachannel 0.24.5,
// the version node-datachannel 0.33.4 bundles: its juice poll thread starts DTLS from an ICE state
// callback holding the agent lock and waits for the DTLS lock, while a pool thread holds the DTLS
// lock and waits for the agent lock; fixed upstream by libdatachannel PR #1630, not yet in a
// node-datachannel release). When the report shows the main thread in that wait (nativeDeadlock),
// the watchdog ends the process with SIGUSR2, and the volunteer's parent (supervise.ts) starts it
// again: it rejoins as a new peer, instead of hanging until someone kills it.
import { Worker } from 'node:worker_threads';

const TICK_MS = 250;

/** The watchdog thread's code (run with eval: plain JavaScript, no loader). */
const WATCHDOG = `
const { workerData } = require('node:worker_threads');
const { execFileSync } = require('node:child_process');
const { writeSync } = require('node:fs');
const { ticked, pid, reportAfterMs, deadlock } = workerData;
const deadlocked = new RegExp(deadlock.source, deadlock.flags);
const last = new BigInt64Array(ticked);
const out = (s) => { try { writeSync(2, s.endsWith('\\n') ? s : s + '\\n'); } catch {} };
let seen = Atomics.load(last, 0), reported = false;
setInterval(() => {
  const now = Atomics.load(last, 0);
  if (now !== seen) {
    if (reported) out('volunteer: stall: the main thread runs again after ' + (Number(now - seen) / 1000).toFixed(0) + ' s');
    seen = now; reported = false;
    return;
  }
  const silentMs = Date.now() - Number(seen);
  if (reported || silentMs < reportAfterMs) return;
  reported = true;
  let stacks;
  try {
    stacks = execFileSync('gdb', ['-p', String(pid), '-batch', '-nx', '-ex', 'set pagination off', '-ex', 'thread apply all bt 30'],
      { timeout: 60000, maxBuffer: 16 << 20, stdio: ['ignore', 'pipe', 'pipe'] }).toString()
      .split('\\n').filter((l) => /^(Thread |#\\d)/.test(l) && !/ in \\?\\? \\(\\)$/.test(l)).join('\\n');
  } catch (e) {
    stacks = 'no stacks: ' + (e && e.code === 'ENOENT' ? 'gdb is not installed' : String(e && e.message || e).split('\\n')[0]);
  }
  out('volunteer: stall: the main thread has not run for ' + (silentMs / 1000).toFixed(0) + ' s; what each thread is doing:\\n'
    + stacks.split('\\n').map((l) => 'volunteer: stall: ' + l).join('\\n'));
  const main = stacks.split(/^(?=Thread )/m).find((t) => t.startsWith('Thread 1 ')) || '';
  if (deadlocked.test(main)) {
    out('volunteer: stall: the main thread waits on a lock inside node-datachannel that its own threads hold against each other '
      + '(libdatachannel #1630): this process ends (SIGUSR2) and starts again');
    process.kill(pid, 'SIGUSR2');
  }
}, 1000);
`;

/**
 * The main thread's stack (gdb's "Thread 1" block) of a native deadlock inside node-datachannel:
 * a lock wait (futex, lll_lock_wait or pthread_mutex_lock) with node-datachannel's frames below it.
 */
export const NATIVE_DEADLOCK = /(lll_lock_wait|pthread_mutex_lock|futex_wait)[\s\S]*node_datachannel\.node/;

/** Whether a report's main-thread stack is the node-datachannel deadlock (what the watchdog ends the process for). */
export function nativeDeadlock(mainThreadStack: string): boolean {
  return NATIVE_DEADLOCK.test(mainThreadStack);
}

export interface StallWatch {
  stop(): void;
}

/**
 * Starts the watchdog for this process (Node only); `reportAfterMs` of main-thread silence make a
 * report, and a report whose main-thread stack matches `deadlock` ends the process (SIGUSR2).
 */
export function watchStalls(reportAfterMs: number, deadlockStack: RegExp = NATIVE_DEADLOCK): StallWatch {
  // The time of the main thread's last tick (ms since the epoch).
  const ticked = new SharedArrayBuffer(8);
  const last = new BigInt64Array(ticked);
  const stamp = () => Atomics.store(last, 0, BigInt(Date.now()));
  stamp();
  const deadlock = { source: deadlockStack.source, flags: deadlockStack.flags };
  const worker = new Worker(WATCHDOG, { eval: true, execArgv: [], workerData: { ticked, pid: process.pid, reportAfterMs, deadlock } });
  worker.unref();
  const tick = setInterval(stamp, TICK_MS);
  tick.unref();
  return {
    stop() {
      clearInterval(tick);
      void worker.terminate();
    },
  };
}

/** The report bound from VT_STALL_REPORT_S (seconds; 0 turns the watchdog off), default 120 s. */
export function stallReportMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.VT_STALL_REPORT_S;
  if (raw === undefined || raw === '') return 120_000;
  const s = Number(raw);
  if (!Number.isFinite(s) || s < 0) throw new Error(`VT_STALL_REPORT_S must be a number of seconds >= 0 (0: no watchdog); got "${raw}"`);
  return s * 1000;
}
