// Work stealing "auto" (coordinator/steal-tuner.ts): the coordinator tries the other way on a
// settled ring, in turn with the kept way, and keeps the faster; pure, then in the driver with a
// clock the test moves.
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  AUTO_FIRST_INTERVAL, AUTO_MAX_INTERVAL, AUTO_PROBE, AUTO_SETTLE, newTuner, stealsNext, tunerRecord, verdictLine, type StealTuner, type TunerVerdict,
} from '../../coordinator/steal-tuner.ts';
import { claim, drain, driverHarness, report } from './driver-harness.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';

/** Runs `steps` steps of `generation` as the tuner asks, each taking `ms(stole)`; the ways run and the verdicts. */
function run(
  t: StealTuner, generation: number, steps: number, ms: (stole: boolean, i: number) => number,
): { t: StealTuner; ways: boolean[]; verdicts: TunerVerdict[] } {
  const ways: boolean[] = [];
  const verdicts: TunerVerdict[] = [];
  for (let i = 0; i < steps; i++) {
    const stole = stealsNext(t, generation);
    ways.push(stole);
    const r = tunerRecord(t, generation, stole, ms(stole, i));
    t = r.tuner;
    if (r.verdict) verdicts.push(r.verdict);
  }
  return { t, ways, verdicts };
}
const repeat = (v: boolean, n: number): boolean[] => Array.from({ length: n }, () => v);
/** A probe's ways: other, kept, kept, other, ..., AUTO_PROBE each. */
const probe = (other: boolean): boolean[] => Array.from({ length: 2 * AUTO_PROBE }, (_, i) => (i % 4 === 0 || i % 4 === 3 ? other : !other));

describe('the steal tuner (pure)', () => {
  it('starts without stealing, probes stealing once the ring settled, and keeps it when it is faster', () => {
    const { t, ways, verdicts } = run(newTuner(), 3, 1 + AUTO_SETTLE + 2 * AUTO_PROBE + 5, (stole) => (stole ? 80 : 100));
    // The generation's first step (ring formation) is not counted, then AUTO_SETTLE steady steps, then the probe.
    expect(ways).toEqual([...repeat(false, 1 + AUTO_SETTLE), ...probe(true), ...repeat(true, 5)]);
    expect(verdicts).toEqual([{ steals: true, switched: true, probeMs: 80, baseMs: 100, nextAfter: AUTO_FIRST_INTERVAL }]);
    expect(t.steals).toBe(true);
    expect(verdictLine(verdicts[0]!)).toBe(
      `steps run with work stealing from now: a median step of 80 ms against 100 ms without work stealing; tried again after ${AUTO_FIRST_INTERVAL} steps`,
    );
  });

  it('stays as it is when the probe is slower, or within the margin; the wait doubles up to its cap', () => {
    const slower = run(newTuner(), 0, 1 + AUTO_SETTLE + 2 * AUTO_PROBE, (stole) => (stole ? 130 : 100));
    expect(slower.verdicts).toEqual([{ steals: false, switched: false, probeMs: 130, baseMs: 100, nextAfter: AUTO_FIRST_INTERVAL }]);
    expect(verdictLine(slower.verdicts[0]!)).toMatch(
      /^steps stay without work stealing: 100 ms a step against 130 ms with work stealing; tried again after 50 steps$/,
    );
    // 2% faster is noise (AUTO_MARGIN 3%).
    const close = run(newTuner(), 0, 1 + AUTO_SETTLE + 2 * AUTO_PROBE, (stole) => (stole ? 98 : 100));
    expect(close.verdicts.map((v) => v.switched)).toEqual([false]);
    // Losing probes come after 50, 100, 200, 400, 800, 800 ... steps of the kept way.
    let t = slower.t;
    const waits: number[] = [];
    for (let k = 0; k < 6; k++) {
      const r = run(t, 0, 2000, (stole) => (stole ? 130 : 100));
      const first = r.ways.indexOf(true);
      waits.push(first);
      t = run(t, 0, first + 2 * AUTO_PROBE, (stole) => (stole ? 130 : 100)).t;
    }
    expect(waits).toEqual([50, 100, 200, 400, AUTO_MAX_INTERVAL, AUTO_MAX_INTERVAL]);
  });

  it('takes the median: one slow step in a probe does not decide it', () => {
    const { verdicts } = run(newTuner(), 0, 1 + AUTO_SETTLE + 2 * AUTO_PROBE, (stole, i) => (stole ? (i === 1 + AUTO_SETTLE ? 5000 : 80) : 100));
    expect(verdicts.map((v) => [v.switched, v.probeMs])).toEqual([[true, 80]]);
  });

  it('interleaves the two ways, so that a load drifting over the probe slows both alike', () => {
    // Every step 2% slower than the one before: a block of stealing steps after a block without
    // would look 11% slower by the drift alone; other-kept-kept-other, both see the same drift.
    const drift = (stole: boolean, i: number) => (stole ? 95 : 100) * 1.02 ** i;
    const { verdicts } = run(newTuner(), 0, 1 + AUTO_SETTLE + 2 * AUTO_PROBE, drift);
    expect(verdicts.map((v) => v.switched)).toEqual([true]);
    expect(verdicts[0]!.probeMs / verdicts[0]!.baseMs).toBeCloseTo(0.95, 3);
  });

  it('a new generation starts over (its first step uncounted, the way kept); a step run the other way is not counted', () => {
    // Settle 15 steps on generation 1, then generation 2: its first step is skipped and the probe waits for a full base again.
    let t = run(newTuner(), 1, 16, () => 100).t;
    const g2 = run(t, 2, 1 + AUTO_SETTLE + 2 * AUTO_PROBE, (stole) => (stole ? 60 : 100));
    expect(g2.ways).toEqual([...repeat(false, 1 + AUTO_SETTLE), ...probe(true)]);
    t = g2.t;
    expect(t.steals).toBe(true);
    // A new ring keeps stealing from its first step.
    expect(stealsNext(tunerRecord(t, 3, true, 999).tuner, 3)).toBe(true);
    // A step that did not run the way asked (planned before a verdict) leaves the tuner as it was.
    expect(tunerRecord(t, 2, false, 1).tuner).toBe(t);
    expect(() => tunerRecord(t, 2, true, Number.NaN)).toThrow(/wallMs must be a finite time >= 0/);
  });
});

describe('work stealing "auto" in the driver', () => {
  afterEach(() => { vi.useRealTimers(); });

  /** Runs the ring of a and b for `steps` steps, a step taking `ms(stole)` of the driver's clock; which steps stole. */
  function steps(h: ReturnType<typeof driverHarness>, first: StepAssignment[], n: number, ms: (stole: boolean) => number): boolean[] {
    let as = first;
    const ways: boolean[] = [];
    for (let i = 0; i < n; i++) {
      const stole = as[0]!.steal !== undefined;
      ways.push(stole);
      vi.setSystemTime(Date.now() + ms(stole));
      if (stole) {
        // a is the faster: it drains the tail; b's claim comes back empty.
        const got = drain(h, 'a', as[0]!);
        expect(claim(h, 'b', as[1]!)).toEqual([]);
        report(h, 'a', as[0]!, got.length);
        report(h, 'b', as[1]!, 0);
      } else for (const [k, id] of ['a', 'b'].entries()) h.result(id, as[k]!);
      expect(h.d.status().step).toBe(as[0]!.step + 1);
      if (i < n - 1) as = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    }
    return ways;
  }

  it('a job of the defaults steals on the steps where it measured faster, and says so in its log', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const n = 1 + AUTO_SETTLE + 2 * AUTO_PROBE + 4;
    const h = driverHarness({ globalBatch: 24, steps: 2 * n });
    expect(h.d.status().step).toBe(0);
    const ways = steps(h, h.startRing(['a', 'b']), n, (stole) => (stole ? 60 : 100));
    expect(ways).toEqual([...repeat(false, 1 + AUTO_SETTLE), ...probe(true), ...repeat(true, 4)]);
    expect(h.logs.filter((l) => /work stealing/.test(l))).toEqual([
      `steps run with work stealing from now: a median step of 60 ms against 100 ms without work stealing; tried again after ${AUTO_FIRST_INTERVAL} steps`,
    ]);
    // Every step committed the sampler's ids, stealing or not.
    expect(h.records.filter((r) => r.type === 'step').length).toBe(n);
    h.d.stop();
  });

  it('where stealing is slower the job goes back to steps without it; stealFraction 0 never probes', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const n = 1 + AUTO_SETTLE + 2 * AUTO_PROBE + 4;
    const h = driverHarness({ globalBatch: 24, steps: 2 * n });
    expect(steps(h, h.startRing(['a', 'b']), n, (stole) => (stole ? 150 : 100))).toEqual([
      ...repeat(false, 1 + AUTO_SETTLE), ...probe(true), ...repeat(false, 4),
    ]);
    expect(h.logs.filter((l) => /work stealing/.test(l))).toEqual([
      `steps stay without work stealing: 100 ms a step against 150 ms with work stealing; tried again after ${AUTO_FIRST_INTERVAL} steps`,
    ]);
    h.d.stop();
    const off = driverHarness({ globalBatch: 24, steps: 2 * n, stealFraction: 0 });
    expect(steps(off, off.startRing(['a', 'b']), n, () => 100)).toEqual(repeat(false, n));
    off.d.stop();
  });
});
