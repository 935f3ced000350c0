// A failure that repeats (src/client/failure-streak.ts): the same cause HALT_AFTER times in a row
// with no step committed pauses the job and says why; another cause, or a commit, starts over.
import { describe, expect, it } from 'vitest';
import { HALT_AFTER, failed, failureKey, halts, noStreak } from '../../src/client/failure-streak.ts';
import { commitAll, driverHarness } from './driver-harness.ts';

const OOM = (step: number) => `step-assignment failed: batch.x [256, 3, 64, 64]: 12582912 bytes do not fit the 4 GiB of WebAssembly memory (step ${step})`;

describe('failure streak', () => {
  it('folds numbers and ids, so one cause at another step or peer is the same cause', () => {
    expect(failureKey(OOM(3))).toBe(failureKey(OOM(4)));
    expect(failureKey('peer 0123abcd4567 lost')).toBe(failureKey('peer 89ef0123aaaa lost'));
    expect(failureKey(OOM(3))).not.toBe(failureKey('the model does not fit'));
  });

  it('halts after HALT_AFTER of one cause in a row, not across causes', () => {
    let s = noStreak();
    for (let i = 0; i < HALT_AFTER - 1; i++) s = failed(s, OOM(i));
    expect(halts(s)).toBe(false);
    expect(halts(failed(failed(s, 'another thing'), OOM(9)))).toBe(false);
    expect(halts(failed(s, OOM(7)))).toBe(true);
  });

  it('the driver pauses the job after the third failed leave of one cause, logs and records why', async () => {
    const h = driverHarness({});
    h.startRing(['a']);
    for (let i = 0; i < HALT_AFTER; i++) {
      const id = `p${i}`;
      if (i > 0) { h.d.peerConnected(id, null); h.take(id, 'load-state'); h.ready(id, 0); h.take(id, 'step-assignment'); }
      h.d.message(i === 0 ? 'a' : id, { type: 'leave', peerId: i === 0 ? 'a' : id, reason: OOM(1), failed: true });
    }
    await expect(h.d.halted).resolves.toMatch(/3 times in a row with no step committed .*do not fit the 4 GiB/);
    expect(h.d.status().phase).toBe('paused');
    expect(h.records.some((r) => r.type === 'halted')).toBe(true);
    expect(h.events.some((e) => e.type === 'halted')).toBe(true);
    expect(h.logs.join('\n')).toMatch(/job paused: .*resume it/);
  });

  it('a commit between failures starts over, and a plain leave is no failure', () => {
    const h = driverHarness({});
    h.startRing(['a', 'b', 'c']);
    h.d.message('c', { type: 'leave', peerId: 'c', reason: OOM(1), failed: true });
    // The re-run without c commits: the streak is gone.
    const rerun = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    commitAll(h, rerun);
    h.d.message('b', { type: 'leave', peerId: 'b', reason: OOM(2), failed: true });
    h.d.message('a', { type: 'leave', peerId: 'a', reason: 'stopped by its owner' });
    expect(h.d.status().phase).not.toBe('paused');
    expect(h.records.some((r) => r.type === 'halted')).toBe(false);
    expect(h.records.filter((r) => r.type === 'step')).toHaveLength(1);
  });
});
