// syncEvery "auto" (coordinator/sync-auto.ts): the coordinator picks H from the live ring's
// costs; pure, then in the driver with a clock the test moves (every step and round committed
// once, the choice in the log, the metrics and the events, and taken at a round boundary).
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  AUTO_WINDOW, ROUNDS_FROM, SYNC_BELOW, chooseH, decisionLine, newSyncAuto, syncCosts, syncReason, syncRecord, syncShare,
  type SyncAuto, type SyncDecision,
} from '../../coordinator/sync-auto.ts';
import { parseJobConfig } from '../../coordinator/job.ts';
import { AUTO_SYNC_MAX } from '../../src/optim/outer.ts';
import { answer, driverHarness } from './driver-harness.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';

/** Feeds `n` steps of `generation` at the H in force, each of wall `wall(h)` and slowest compute `compute(h)`. */
function feed(
  a: SyncAuto, generation: number, n: number, wall: (h: number) => number, compute: (h: number) => number, from = 0,
): { a: SyncAuto; decisions: SyncDecision[]; hs: number[]; end: number } {
  const decisions: SyncDecision[] = [];
  const hs: number[] = [];
  let end = from;
  for (let i = 0; i < n; i++) {
    hs.push(a.h);
    end += a.h;
    const r = syncRecord(a, generation, end, { h: a.h, wallMs: wall(a.h), computeMs: compute(a.h) }, true);
    a = r.auto;
    if (r.decision) decisions.push(r.decision);
  }
  return { a, decisions, hs, end };
}

describe('sync auto (pure)', () => {
  it('keeps sync while the all-reduce is cheap, and picks the smallest H that brings the rest to a tenth', () => {
    expect(syncShare(100, 50, 1)).toBeCloseTo(1 / 3);
    expect(syncShare(100, 50, 8)).toBeCloseTo(50 / 850);
    expect(chooseH(100, 10, 1)).toBe(1); // 9%
    expect(chooseH(100, 40, 1)).toBe(1); // 29%: below ROUNDS_FROM
    expect(chooseH(100, 50, 1)).toBe(8); // 33%: H = 4 leaves 11%, 8 leaves 6%
    expect(chooseH(100, 12, 8)).toBe(1); // 11%: below SYNC_BELOW, back to sync
    expect(chooseH(100, 30, 8)).toBe(4); // 23%, between the two: rounds stay, of 4 (7%)
    expect(chooseH(100, 30, 1)).toBe(1); // the same costs keep sync when sync is in force
    expect(chooseH(10, 1000, 1)).toBe(AUTO_SYNC_MAX); // nothing reaches a tenth: the longest
    expect(ROUNDS_FROM).toBeGreaterThan(SYNC_BELOW);
  });

  it('measures per inner step and per synchronisation, with medians', () => {
    expect(syncCosts([{ h: 1, wallMs: 100, computeMs: 40 }, { h: 1, wallMs: 900, computeMs: 40 }, { h: 1, wallMs: 110, computeMs: 50 }]))
      .toEqual({ computeMs: 40, syncMs: 60 });
    expect(syncCosts([{ h: 8, wallMs: 900, computeMs: 800 }])).toEqual({ computeMs: 100, syncMs: 100 });
    // A wall shorter than the compute (clocks of different machines) counts as no cost, not a negative one.
    expect(syncCosts([{ h: 1, wallMs: 90, computeMs: 100 }]).syncMs).toBe(0);
  });

  it('skips each generation\'s first step, decides after a window, and measures again at the new H', () => {
    const slow = feed(newSyncAuto(), 0, 1 + AUTO_WINDOW + 2, () => 100, (h) => 10 * h);
    expect(slow.hs).toEqual([1, 1, 1, 1, 8, 8]);
    expect(slow.decisions).toEqual([{ step: 4, from: 1, h: 8, share: 0.9, computeMs: 10, syncMs: 90, reason: syncReason(10, 90, 8) }]);
    expect(decisionLine(slow.decisions[0]!)).toBe(
      'sync auto: after step 4, rounds of 8 local steps (was every step): the all-reduce and waiting are 90% of a sync step '
      + '(90 ms to synchronise against 10 ms of compute per step): '
      + 'rounds of 8 bring it to 53%, 4.7x the images per second');
    // The link got fast: once most of the window is fast rounds, back to sync (and the reason says it is exact).
    const fast = feed(slow.a, 0, AUTO_WINDOW + 2, (h) => 10 * h + 1, (h) => 10 * h, slow.end);
    expect(fast.hs).toEqual([8, 8, 1, 1, 1]);
    expect(fast.decisions.map((d) => [d.from, d.h])).toEqual([[8, 1]]);
    expect(fast.decisions[0]!.reason).toMatch(/9% of a sync step .*: every step synchronised, exact$/);
    // A new generation: its first step is not counted, the window starts again, H stays.
    const regen = feed(fast.a, 1, AUTO_WINDOW, () => 100, () => 10, fast.end);
    expect(regen.hs).toEqual([1, 1, 1]);
    expect(regen.decisions).toEqual([]);
    expect(regen.a.samples.length).toBe(AUTO_WINDOW - 1);
  });

  it('one slow step does not move it; unmeasured steps and another H are not counted', () => {
    let a = feed(newSyncAuto(), 2, 1, () => 100, () => 90).a;
    for (const wall of [100, 5000, 100]) a = syncRecord(a, 2, 9, { h: 1, wallMs: wall, computeMs: 90 }, true).auto;
    expect(a.h).toBe(1);
    const skipped = syncRecord(a, 2, 10, { h: 1, wallMs: 9000, computeMs: 10 }, false);
    expect(skipped.auto).toBe(a);
    expect(syncRecord(a, 2, 10, { h: 4, wallMs: 9000, computeMs: 10 }, true).auto).toBe(a);
  });
});

describe('sync auto in the driver', () => {
  afterEach(() => { vi.useRealTimers(); });
  const AUTO = { syncEvery: 'auto', momentumCarry: 0.75, outerLr: 1, outerMomentum: 0 };

  /** Runs the ring of a and b: each step or round takes `wall(h)` of the driver's clock, each member computes `compute(h)`; the Hs run. */
  function run(
    h: ReturnType<typeof driverHarness>, first: StepAssignment[], n: number, wall: (h: number) => number, compute: (h: number) => number,
  ): { hs: number[]; next: StepAssignment[] } {
    let as = first;
    const hs: number[] = [];
    for (let i = 0; i < n && as.length; i++) {
      const inner = as[0]!.round ? as[0]!.round.ids.length : 1;
      for (const a of as) expect(a.round ? a.round.ids.length : 1).toBe(inner); // every member told the same H
      hs.push(inner);
      vi.setSystemTime(Date.now() + wall(inner));
      const at = h.d.status().step;
      for (const a of as) answer(h, a.ring[a.rank]!, a, compute(inner));
      expect(h.d.status().step).toBe(at + inner);
      as = ['a', 'b'].filter((id) => h.has(id, 'step-assignment')).map((id) => h.take(id, 'step-assignment'));
    }
    return { hs, next: as };
  }

  it('a slow ring goes to rounds of 8 after a window of sync steps, and back to sync when the link gets fast; every step once', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const h = driverHarness({ ...AUTO, globalBatch: 24, steps: 60 });
    const slow = run(h, h.startRing(['a', 'b']), 1 + AUTO_WINDOW + AUTO_WINDOW, () => 100, (k) => 10 * k);
    expect(slow.hs).toEqual([1, 1, 1, 1, 8, 8, 8]);
    // The median of the window: the second fast round decides.
    const fast = run(h, slow.next, 4, (k) => 10 * k + 1, (k) => 10 * k);
    expect(fast.hs).toEqual([8, 8, 1, 1]);
    const syncs = h.records.filter((r) => r.type === 'sync');
    expect(syncs.map((r) => [r.step, r.from, r.h])).toEqual([[4, 1, 8], [44, 8, 1]]);
    expect(h.events.filter((e) => e.type === 'sync').map((e) => e.h)).toEqual([8, 1]);
    expect(h.logs.filter((l) => l.startsWith('sync auto:'))).toEqual(syncs.map((r) => decisionLine(r as SyncDecision)));
    // No step lost or doubled: the committed steps and rounds end where their inner steps add up to.
    const ends = h.records.filter((r) => r.type === 'step').map((r) => [r.step, r.traffic?.innerSteps]);
    expect(ends).toEqual([[1, 1], [2, 1], [3, 1], [4, 1], [12, 8], [20, 8], [28, 8], [36, 8], [44, 8], [45, 1], [46, 1]]);
    h.d.stop();
  });

  it('a restarted coordinator resumes with the H it chose last; the last round of a job is shorter and not measured', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const h = driverHarness({ ...AUTO, globalBatch: 24, steps: 20 }, { syncH: 8 });
    const r = run(h, h.startRing(['a', 'b']), 10, () => 100, (k) => 10 * k);
    expect(r.hs).toEqual([8, 8, 4]);
    expect(h.records.filter((x) => x.type === 'sync')).toEqual([]);
    h.d.stop();
  });

  it('a fixed syncEvery never changes, however slow the ring', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const h = driverHarness({ globalBatch: 24, steps: 12 });
    expect(run(h, h.startRing(['a', 'b']), 12, () => 1000, () => 1).hs).toEqual(Array.from({ length: 12 }, () => 1));
    expect(h.records.filter((x) => x.type === 'sync')).toEqual([]);
    h.d.stop();
  });
});

describe('syncEvery "auto" in a job file', () => {
  const base = {
    model: 'small-cnn', dataset: 'mnist', globalBatch: 24, steps: 10, optimizer: { kind: 'sgd', lr: 0.1 }, evalEvery: 0, checkpointEvery: 5, seed: 1,
  };
  it('holds the rounds state for up to AUTO_SYNC_MAX steps and needs the momentum carry', () => {
    const job = parseJobConfig({ ...base, syncEvery: 'auto', momentumCarry: 0.75 }, 500);
    expect(job.outer).toMatchObject({ syncEvery: AUTO_SYNC_MAX, auto: true, carry: 0.75 });
    expect(() => parseJobConfig({ ...base, syncEvery: 'auto' }, 500)).toThrow(/syncEvery "auto" goes back to sync steps after rounds, .*set momentumCarry/);
    expect(() => parseJobConfig({ ...base, syncEvery: 'fast' }, 500)).toThrow(/syncEvery must be "auto" or an integer in \[1, 1024\], got "fast"/);
    expect(() => parseJobConfig({ ...base, syncEvery: 'auto', momentumCarry: 0.75, wire: 'i8' }, 500))
      .toThrow(/rounds \(syncEvery > 1 or "auto"\) do not have/);
    expect(parseJobConfig({ ...base, syncEvery: 4 }, 500).outer.auto).toBeUndefined();
  });
});
