// A Node volunteer runs as the child of a small parent process that starts it again when it ends
// of a native deadlock (stall-watch.ts ends a process whose main thread waits forever on a lock
// inside node-datachannel, with SIGUSR2): the volunteer rejoins as a new peer instead of hanging
// until someone kills it. The parent also carries what the child must start with (the
// coordinator's CA for NODE_EXTRA_CA_CERTS, node-trust.ts), passes SIGINT and SIGTERM on (a
// volunteer told to stop leaves after its step), and ends with the child's exit code. The child
// ends when its parent is gone (its IPC channel closes), also when the parent is killed outright.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/** Set in the child's environment: it is the volunteer itself, not the parent. */
export const CHILD_ENV = 'VT_VOLUNTEER_CHILD';
/** The signal the watchdog ends a deadlocked volunteer with. */
export const DEADLOCK_SIGNAL: NodeJS.Signals = 'SIGUSR2';
/** At most this many restarts within RESTART_WINDOW_MS: a deadlock that keeps coming back is reported, not looped on. */
export const MAX_RESTARTS = 5;
export const RESTART_WINDOW_MS = 10 * 60_000;
/** How the parent's line about a restart after a deadlock begins (tests count restarts by it: coordinator/local-volunteers.ts). */
export const RESTARTED_AFTER_DEADLOCK = 'volunteer: restarting after a deadlock inside node-datachannel';

export interface SuperviseOptions {
  command: string;
  args: readonly string[];
  /** Added to this process's environment for the child (CHILD_ENV is added too). */
  env: NodeJS.ProcessEnv;
  /** Start the child again when it ends of DEADLOCK_SIGNAL (false: once, as it ends). */
  restart: boolean;
  log: (line: string) => void;
  /** End (and end the child, outright) when the process that started this one is gone (followStarter). */
  followStarter?: boolean;
}

/** Runs the child until it ends other than of a deadlock (or too often of one); resolves with its exit code (128 + signal number for a signal). */
export async function supervise(o: SuperviseOptions): Promise<number> {
  const restarts: number[] = [];
  let current: ReturnType<typeof spawn> | null = null;
  if (o.followStarter) followStarter(() => current?.kill('SIGKILL'));
  for (;;) {
    const child = spawn(o.command, [...o.args], { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], env: { ...process.env, ...o.env, [CHILD_ENV]: '1' } });
    current = child;
    const pass = (s: NodeJS.Signals) => child.kill(s);
    process.on('SIGINT', pass);
    process.on('SIGTERM', pass);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => child.once('exit', (c, s) => r([c, s])));
    process.off('SIGINT', pass);
    process.off('SIGTERM', pass);
    if (signal === DEADLOCK_SIGNAL && o.restart) {
      const now = Date.now();
      restarts.push(now);
      while (restarts.length && restarts[0]! < now - RESTART_WINDOW_MS) restarts.shift();
      if (restarts.length <= MAX_RESTARTS) {
        o.log(`${RESTARTED_AFTER_DEADLOCK} (${restarts.length} in the last ${RESTART_WINDOW_MS / 60_000} minutes)`);
        continue;
      }
      o.log(`volunteer: node-datachannel deadlocked ${restarts.length} times in ${RESTART_WINDOW_MS / 60_000} minutes: `
        + 'giving up (update node-datachannel, or report it with the stacks above)');
    }
    return code ?? 128 + (signal ? constants.signals[signal] ?? 0 : 0);
  }
}

/** In the child: ends this process when its parent is gone (the IPC channel to it closed). */
export function followParent(): void {
  if (!process.connected) return;
  process.on('disconnect', () => process.exit(129));
  // The channel must not keep the child alive once its work is done.
  process.channel?.unref();
}

/**
 * Set by npm start for its local volunteers (coordinator/local-volunteers.ts): they end when npm
 * start is gone, also when it is killed outright (a test's time limit, an OOM kill), instead of
 * computing on as orphans. A volunteer started by hand (a lab desktop) keeps running without it.
 */
export const FOLLOW_STARTER_ENV = 'VT_FOLLOW_STARTER';
/** How often the parent's pid is looked at. */
export const FOLLOW_POLL_MS = 500;

/**
 * Ends this process (exit 129, after `onGone`) when the process that started it is gone: Linux
 * hands an orphan to another parent, so process.ppid (read anew each time) changes. The timer
 * does not keep the process alive; a main thread blocked in compute notices when it runs again.
 */
export function followStarter(onGone: () => void = () => {}): void {
  const starter = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === starter) return;
    clearInterval(timer);
    onGone();
    process.exit(129);
  }, FOLLOW_POLL_MS);
  timer.unref();
}
