// Joiner batching (DriverTimeouts.admitGapMs): under churn joiners wait, at most admitGapMs, so
// that those who come meanwhile enter in one new generation; a calm ring admits at once.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { commitAll as commit, driverHarness } from './driver-harness.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';
import { LEAVE_AFTER_STEP_MS } from '../../src/client/volunteer-session.ts';
import { LEAVE_HOLD_MAX_MS, leaveHoldMs } from '../../coordinator/driver-generations.ts';
import { DEFAULT_TIMEOUTS } from '../../coordinator/driver-types.ts';

/**
 * A ring of 9 at time 1,000,000 (fake Date) that churns: c leaves 300 ms after it formed, so two
 * generations began within the 2 s admission gap; `as` are the re-run's assignments of the 8 left.
 */
function churningRing(): ReturnType<typeof driverHarness> & { as: StepAssignment[] } {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(1_000_000);
  const h = driverHarness({ steps: 50 }, { timeouts: { admitGapMs: 2000 } });
  commit(h, h.startRing(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']));
  vi.setSystemTime(1_000_300);
  h.d.peerGone('c', 'stopped by its owner');
  return Object.assign(h, { as: ['a', 'b', 'd', 'e', 'f', 'g', 'h', 'i'].map((id) => h.take(id, 'step-assignment')) });
}

/**
 * A ring of `ids` (gap `admitGapMs`, fake Date from 1,000,000) in which b asks to leave after its
 * step, then one of `gone` is lost every `everyMs`: a new generation each time, the ring keeps
 * churning. Returns the time of the boundary at which b got done.
 */
function heldLeaver(ids: string[], gone: string[], admitGapMs: number, everyMs: number): number {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(1_000_000);
  const h = driverHarness({ steps: 80 }, { timeouts: { admitGapMs } });
  let as = h.startRing(ids);
  as = commit(h, as);
  h.d.message('b', { type: 'leave', peerId: 'b', reason: 'stopped by its owner', afterStep: true });
  let t = 1_000_000;
  for (const id of gone) {
    t += everyMs;
    vi.setSystemTime(t);
    h.d.peerGone(id, 'stopped by its owner');
    as = h.d.status().ring.map((x) => h.take(x, 'step-assignment'));
    if (h.has('b', 'done')) break;
    as = commit(h, as);
  }
  expect(h.take('b', 'done')).toBeTruthy();
  expect(h.d.status().ring).not.toContain('b');
  h.d.stop();
  return t;
}

describe('joiner batching', () => {
  afterEach(() => vi.useRealTimers());

  it('a calm ring admits a joiner at the next boundary', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const h = driverHarness({}, { timeouts: { admitGapMs: 2000 } });
    const as = h.startRing(['a', 'b']);
    // (The ring formed in two generations at once, a and then b: a ramp. Calm 5 s later.)
    vi.setSystemTime(1_005_000);
    h.d.peerConnected('j', null);
    commit(h, as);
    // Admitted at once: the ring's first member uploads step 1 for it, and it loads it.
    expect(h.take('a', 'upload-checkpoint')).toEqual({ type: 'upload-checkpoint', step: 1 });
    h.d.checkpointStored('a', 1);
    expect(h.take('j', 'load-state')).toMatchObject({ step: 1 });
    h.d.stop();
  });

  it('under churn joiners wait up to admitGapMs, then enter together in one generation', () => {
    const h = churningRing();
    let as = h.as;
    const generation = as[0]!.generation;
    vi.setSystemTime(1_000_400);
    h.d.peerConnected('x', null);
    as = commit(h, as);
    expect(h.has('x', 'load-state') || h.has('a', 'upload-checkpoint')).toBe(false);
    vi.setSystemTime(1_001_200);
    h.d.peerConnected('y', null);
    as = commit(h, as);
    expect(h.has('x', 'load-state') || h.has('y', 'load-state') || h.has('a', 'upload-checkpoint')).toBe(false);
    expect(as.every((a) => a.generation === generation)).toBe(true);
    // x has waited the gap: both enter at the next boundary, in one new generation.
    vi.setSystemTime(1_002_500);
    commit(h, as);
    const step = h.d.status().step;
    expect(h.take('a', 'upload-checkpoint')).toEqual({ type: 'upload-checkpoint', step });
    h.d.checkpointStored('a', step);
    for (const id of ['x', 'y']) { expect(h.take(id, 'load-state')).toMatchObject({ step }); h.ready(id, step); }
    const next = ['a', 'b', 'd', 'e', 'f', 'g', 'h', 'i', 'x', 'y'].map((id) => h.take(id, 'step-assignment'));
    expect(new Set(next.map((a) => a.generation))).toEqual(new Set([generation + 1]));
    expect(next[0]!.ring).toEqual(['a', 'b', 'd', 'e', 'f', 'g', 'h', 'i', 'x', 'y']);
    h.d.stop();
  });

  it('a ring smaller than ADMIT_BATCH_FROM admits at once even under churn', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const h = driverHarness({}, { timeouts: { admitGapMs: 2000 } });
    let as = h.startRing(['a', 'b', 'c']);
    as = commit(h, as);
    vi.setSystemTime(1_000_100);
    h.d.peerGone('c', 'stopped by its owner');
    as = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    vi.setSystemTime(1_000_200);
    h.d.peerConnected('x', null);
    commit(h, as);
    expect(h.take('a', 'upload-checkpoint')).toMatchObject({ step: h.d.status().step });
    h.d.stop();
  });
});

describe('a member that leaves after its step', () => {
  afterEach(() => vi.useRealTimers());

  it('keeps its slice in the running step; at the commit it gets done and the ring goes on without it, nothing aborted', () => {
    const h = driverHarness({});
    let as = h.startRing(['a', 'b', 'c']);
    h.d.message('b', { type: 'leave', peerId: 'b', reason: 'stopped by its owner', afterStep: true });
    expect(h.d.status().ring).toEqual(['a', 'b', 'c']);
    as = commit(h, as);
    expect(h.take('b', 'done')).toMatchObject({ step: 1 });
    expect(as.map((a) => a.ring[a.rank])).toEqual(['a', 'c']);
    expect(as.every((a) => a.step === 1 && a.reuse === undefined)).toBe(true);
    expect(h.records.filter((r) => r.type === 'abort')).toEqual([]);
    expect(h.records.filter((r) => r.type === 'step').length).toBe(1);
    // Its plain leave (sent as it closes) changes nothing more.
    h.d.message('b', { type: 'leave', peerId: 'b', reason: 'stopped by its owner' });
    expect(h.d.status().ring).toEqual(['a', 'c']);
    h.d.stop();
  });

  it('under churn in a big ring it trains on until the next admission, and goes with the joiners: one new generation', () => {
    const h = churningRing();
    let as = h.as;
    const generation = as[0]!.generation;
    // b asks to leave after its step, and a joiner comes: neither changes the ring at this commit.
    vi.setSystemTime(1_000_400);
    h.d.message('b', { type: 'leave', peerId: 'b', reason: 'stopped by its owner', afterStep: true });
    h.d.peerConnected('x', null);
    as = commit(h, as);
    expect(h.has('b', 'done')).toBe(false);
    expect(as.map((a) => a.ring[a.rank])).toEqual(['a', 'b', 'd', 'e', 'f', 'g', 'h', 'i']);
    expect(as.every((a) => a.generation === generation)).toBe(true);
    // The gap has passed: b goes and x is admitted at the same boundary.
    vi.setSystemTime(1_002_500);
    commit(h, as);
    expect(h.take('b', 'done')).toMatchObject({ step: h.d.status().step });
    const step = h.d.status().step;
    expect(h.take('a', 'upload-checkpoint')).toEqual({ type: 'upload-checkpoint', step });
    h.d.checkpointStored('a', step);
    expect(h.take('x', 'load-state')).toMatchObject({ step });
    h.ready('x', step);
    const next = ['a', 'd', 'e', 'f', 'g', 'h', 'i', 'x'].map((id) => h.take(id, 'step-assignment'));
    expect(next[0]!.ring).toEqual(['a', 'd', 'e', 'f', 'g', 'h', 'i', 'x']);
    // The generation without b was never used for a step: ring formations happen once.
    expect(new Set(next.map((a) => a.generation)).size).toBe(1);
    // The one abort is c's (it left mid-step); b's leave aborted nothing.
    expect(h.records.flatMap((r) => (r.type === 'abort' ? [r.reason] : []))).toEqual([expect.stringMatching(/^c left/)]);
    h.d.stop();
  });

  it('under churn in a big ring, with nobody to admit, it goes once the ring is calm again (no new generation for admitGapMs)', () => {
    const h = churningRing();
    let as = h.as;
    h.d.message('b', { type: 'leave', peerId: 'b', reason: 'stopped by its owner', afterStep: true });
    vi.setSystemTime(1_001_000);
    as = commit(h, as);
    expect(h.has('b', 'done')).toBe(false);
    vi.setSystemTime(1_002_400);
    as = commit(h, as);
    expect(h.take('b', 'done')).toBeTruthy();
    expect(as.map((a) => a.ring[a.rank])).toEqual(['a', 'd', 'e', 'f', 'g', 'h', 'i']);
    h.d.stop();
  });

  it('under churn that does not calm down, it goes after LEAVE_HOLD_GAPS admission gaps at the latest (2 s gaps)', () => {
    // Lost every 1.5 s: held through the churn while it waited less than 3 x 2 s, let go at the first boundary after.
    expect(heldLeaver(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'], ['c', 'd', 'e', 'f'], 2000, 1500)).toBe(1_006_000);
  });

  it('with the default 6 s gap a leaver is held at most LEAVE_HOLD_MAX_MS, so it goes at a commit before the volunteer gives up waiting', () => {
    // 3 gaps of 6 s would be 18 s, past the 15 s after which the volunteer leaves on its own
    // (as a lost peer: an abort). The cap leaves room for the announcement's wait and a step.
    expect(DEFAULT_TIMEOUTS.admitGapMs).toBe(6000);
    expect(leaveHoldMs(DEFAULT_TIMEOUTS.admitGapMs)).toBe(LEAVE_HOLD_MAX_MS);
    expect(LEAVE_HOLD_MAX_MS + DEFAULT_TIMEOUTS.prepareMs).toBeLessThan(LEAVE_AFTER_STEP_MS - 2000);
    expect(leaveHoldMs(2000)).toBe(6000);
    // Lost every 4 s (generations less than 6 s apart): held at 4 and 8 s, let go at the first
    // boundary after 10 s (not 18 s).
    const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o'];
    expect(heldLeaver(ids, ['c', 'd', 'e', 'f', 'g', 'h'], DEFAULT_TIMEOUTS.admitGapMs, 4000)).toBe(1_012_000);
  });

  it('a leave after the step from a peer that is not in a running step is a leave now', () => {
    const h = driverHarness({});
    h.startRing(['a', 'b']);
    h.d.peerConnected('j', null);
    h.d.message('j', { type: 'leave', peerId: 'j', reason: 'stopped', afterStep: true });
    expect(h.d.status().peers).toBe(2);
    h.d.stop();
  });
});
