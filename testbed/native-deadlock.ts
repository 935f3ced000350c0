// Tests of ring changes across hosts, and node-datachannel's own deadlock.
//
// node-datachannel 0.33.4 bundles libdatachannel 0.24.5, which can deadlock while a link's DTLS
// handshake starts (the ICE poll thread holds the agent's lock and waits for the DTLS lock, a pool
// thread holds that and waits for the agent's; most often on TURN-relayed links; fixed upstream by
// libdatachannel PR #1630, in no node-datachannel release yet). A volunteer survives it: its
// watchdog ends it and its parent starts it again (src/client/stall-watch.ts, supervise.ts), and
// it rejoins as a new peer. A test that asserts how a ring changed (which links were dialed ahead,
// which peers formed which ring) cannot pass through that: the restarted peer is a change of its
// own, and rejoining can take longer than the test's job. Such a test runs through
// `onceMoreAfterNativeDeadlock`: when an attempt fails and one of its volunteers was restarted of
// that deadlock, the attempt runs once more, from the start, and says so. Any other failure, and
// a second failure of any kind, fails the test.
import type { LocalVolunteer } from '../coordinator/local-volunteers.ts';

/** One attempt of a test: its number (1 or 2), the volunteers it starts (it adds them), and `guard` for its waits. */
export interface Attempt {
  readonly run: number;
  readonly vols: LocalVolunteer[];
  /** `wait`, or a rejection as soon as one of `vols` has been restarted of the deadlock (no need to wait out a bound then). */
  guard<T>(wait: Promise<T>): Promise<T>;
}

/** How often `guard` looks at the volunteers' restarts. */
const LOOK_MS = 500;

/** The names of `vols` that were restarted of node-datachannel's deadlock. */
export function restartedOfDeadlock(vols: readonly LocalVolunteer[]): string[] {
  return vols.filter((v) => v.deadlockRestarts > 0).map((v) => v.name);
}

function attemptOf(run: number): Attempt {
  const vols: LocalVolunteer[] = [];
  const guard = <T>(wait: Promise<T>): Promise<T> => {
    let timer: ReturnType<typeof setInterval> | undefined;
    const restarted = new Promise<never>((_, reject) => {
      timer = setInterval(() => {
        const names = restartedOfDeadlock(vols);
        if (names.length > 0) reject(new Error(`${names.join(', ')} restarted after a deadlock inside node-datachannel`));
      }, LOOK_MS);
    });
    return Promise.race([wait, restarted]).finally(() => clearInterval(timer));
  };
  return { run, vols, guard };
}

/**
 * Runs `attempt`; when it fails and a volunteer it started was restarted of node-datachannel's
 * deadlock, logs why (with `log`) and runs it once more. Resolves when an attempt passes.
 */
export async function onceMoreAfterNativeDeadlock(
  what: string, attempt: (a: Attempt) => Promise<void>, log: (line: string) => void = console.log,
): Promise<void> {
  const first = attemptOf(1);
  try {
    await attempt(first);
    return;
  } catch (e) {
    const restarted = restartedOfDeadlock(first.vols);
    if (restarted.length === 0) throw e;
    const why = (e instanceof Error ? e.message : String(e)).split('\n')[0];
    log(`${what}: ${restarted.join(', ')} restarted after node-datachannel's own deadlock (libdatachannel #1630), and the attempt `
      + `failed (${why}): running it once more`);
  }
  await attempt(attemptOf(2));
}
