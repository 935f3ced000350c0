// A volunteer's restarts of node-datachannel's deadlock are counted from its parent's line
// (coordinator/local-volunteers.ts), and a test of ring changes runs once more only after such a
// restart (testbed/native-deadlock.ts). The processes here print what a supervising parent prints
// (src/client/supervise.ts's own constant) instead of deadlocking, which cannot be made on demand.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { spawnVolunteer, type LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { RESTARTED_AFTER_DEADLOCK } from '../../src/client/supervise.ts';
import { onceMoreAfterNativeDeadlock, restartedOfDeadlock, type Attempt } from '../../testbed/native-deadlock.ts';

/** A process in a volunteer's place that prints `restarts` restart lines after `afterMs`, then lives for `liveMs`. */
function printer(name: string, restarts: number, afterMs = 0, liveMs = 0): LocalVolunteer {
  const line = JSON.stringify(`${RESTARTED_AFTER_DEADLOCK} (1 in the last 10 minutes)`);
  const script = `setTimeout(() => { console.error('volunteer: joined'); for (let i = 0; i < ${restarts}; i++) console.error(${line}); `
    + `setTimeout(() => {}, ${liveMs}); }, ${afterMs});`;
  return spawnVolunteer({ url: 'http://127.0.0.1:9', name, launch: (_cmd, _args, opts) => spawn(process.execPath, ['-e', script], opts) });
}

describe('node-datachannel deadlock restarts in tests', () => {
  it("counts a volunteer's restarts from its parent's lines", async () => {
    const [two, none] = [printer('two', 2), printer('none', 0)];
    await Promise.all([two.exited, none.exited]);
    expect([two.deadlockRestarts, none.deadlockRestarts]).toEqual([2, 0]);
    expect(restartedOfDeadlock([two, none])).toEqual(['two']);
  });

  it('runs an attempt once more only when it failed after a restart, and fails on a second failure', async () => {
    const logs: string[] = [];
    const runs: number[] = [];
    // Fails after a restart, then passes.
    await onceMoreAfterNativeDeadlock('t', async (a) => {
      runs.push(a.run);
      const v = printer(`v${a.run}`, a.run === 1 ? 1 : 0);
      a.vols.push(v);
      await v.exited;
      if (a.run === 1) throw new Error('the ring of 9 did not come\nmore');
    }, (l) => logs.push(l));
    expect(runs).toEqual([1, 2]);
    expect(logs).toEqual([
      "t: v1 restarted after node-datachannel's own deadlock (libdatachannel #1630), and the attempt failed (the ring of 9 did not come): "
      + 'running it once more',
    ]);

    // Fails without a restart: no second attempt.
    runs.length = 0;
    await expect(onceMoreAfterNativeDeadlock('t', async (a) => {
      runs.push(a.run);
      const v = printer('quiet', 0);
      a.vols.push(v);
      await v.exited;
      throw new Error('a fault of ours');
    }, () => undefined)).rejects.toThrow('a fault of ours');
    expect(runs).toEqual([1]);

    // Fails after a restart both times: the second failure is the test's.
    runs.length = 0;
    await expect(onceMoreAfterNativeDeadlock('t', async (a) => {
      runs.push(a.run);
      const v = printer(`r${a.run}`, 1);
      a.vols.push(v);
      await v.exited;
      throw new Error(`failure ${a.run}`);
    }, () => undefined)).rejects.toThrow('failure 2');
    expect(runs).toEqual([1, 2]);

    // Passes despite a restart: once.
    runs.length = 0;
    await onceMoreAfterNativeDeadlock('t', async (a) => {
      runs.push(a.run);
      const v = printer('p', 1);
      a.vols.push(v);
      await v.exited;
    }, () => undefined);
    expect(runs).toEqual([1]);
  });

  it('ends a guarded wait as soon as a volunteer is restarted, and leaves other waits to their end', async () => {
    let seen: Attempt | null = null;
    const t0 = Date.now();
    await expect(onceMoreAfterNativeDeadlock('t', async (a) => {
      seen = a;
      const v = printer(`g${a.run}`, 1, 300, 5000);
      a.vols.push(v);
      try {
        // A wait of 20 s that the restart ends within about a second.
        await a.guard(new Promise((res) => setTimeout(res, 20_000)));
      } finally {
        v.kill('SIGKILL');
      }
    }, () => undefined)).rejects.toThrow(/g2 restarted after a deadlock inside node-datachannel/);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(seen!.run).toBe(2);

    // Without a restart a guarded wait runs to its end and gives its value.
    const values: unknown[] = [];
    await onceMoreAfterNativeDeadlock('t', async (b) => {
      const v = printer(`q${b.run}`, 0, 0, 3000);
      b.vols.push(v);
      values.push(await b.guard(new Promise((res) => setTimeout(() => res(b.run), 1500))));
      v.kill('SIGKILL');
    }, () => undefined);
    expect(values).toEqual([1]);
  });
});
