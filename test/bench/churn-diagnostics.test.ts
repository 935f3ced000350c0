// Where a churning job's time goes, as the churn bench reports it: the driver's phase clock, the
// bench's window over two of its readings, and the split of committed steps into each
// generation's first (its ring forms during it) and the rest.
import { describe, expect, it } from 'vitest';
import { PhaseClock } from '../../coordinator/driver-types.ts';
import { bracketCalm, cpuSecondsOfStat, cpuSplit, lossSplit, stepSplit } from '../../bench/churn-check.ts';
import { phaseWindow } from '../../bench/churn-run.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';

describe('PhaseClock', () => {
  it('adds up the time spent in each kind of phase, the current one up to now', () => {
    const c = new PhaseClock('between');
    c.enter('running', performance.now() + 0); // leaves 'between' now
    const t0 = performance.now();
    c.enter('admitting', t0 + 100);
    c.enter('running', t0 + 130);
    c.committed(80);
    const t = c.times(t0 + 200);
    expect(t.running).toBeCloseTo(100 + 70, 0);
    expect(t.admitting).toBeCloseTo(30, 6);
    expect(t.committedRunning).toBe(80);
    expect(t.evaluating).toBe(0);
    // Reading does not change what was counted.
    expect(c.times(t0 + 200)).toEqual(t);
  });

  it('gives the window between two readings in seconds', () => {
    const zero = { between: 0, admitting: 0, running: 0, committedRunning: 0, evaluating: 0, finishing: 0, paused: 0, done: 0 };
    const a = { ...zero, running: 1000, admitting: 500 };
    const b = { ...zero, running: 4500, committedRunning: 3000, admitting: 1234, evaluating: 10 };
    expect(phaseWindow(a, b)).toEqual({ ...zero, running: 3.5, committedRunning: 3, admitting: 0.73, evaluating: 0.01 });
    expect(phaseWindow(null, b).running).toBe(4.5);
  });
});

describe('stepSplit', () => {
  const step = (time: number, generation: number, wallMs: number) => ({
    type: 'step', time, step: time, generation, ring: 3, loss: null, imagesPerSec: 0, wallMs, peers: [],
  }) as unknown as MetricRecord;
  it("separates each generation's first committed step from the rest, inside the window only", () => {
    const records: MetricRecord[] = [
      step(1, 1, 900), step(2, 1, 100), // before the window: generation 1's first step stays out
      { type: 'abort', time: 3, step: 3, generation: 1, reason: 'x' } as MetricRecord,
      step(4, 2, 1200), step(5, 2, 80), step(6, 2, 120), step(7, 3, 300), step(8, 3, 90),
      step(9, 4, 5000), // after the window
    ];
    expect(stepSplit(records, 2, 8)).toEqual({
      first: { steps: 2, medianMs: 750, totalMs: 1500 },
      rest: { steps: 3, medianMs: 90, totalMs: 290 },
    });
    // A generation whose first step fell before the window counts its later steps as the rest.
    expect(stepSplit(records, 1, 2)).toEqual({ first: { steps: 0, medianMs: 0, totalMs: 0 }, rest: { steps: 1, medianMs: 100, totalMs: 100 } });
  });
});

describe('lossSplit', () => {
  it('splits what churn cost into membership changes and a slower ordinary pace', () => {
    const split = (firstSteps: number, firstMs: number, restSteps: number, restMs: number) => ({
      first: { steps: firstSteps, medianMs: 0, totalMs: firstMs }, rest: { steps: restSteps, medianMs: 0, totalMs: restMs },
    });
    // 10 first steps of 500 ms and 90 ordinary ones of 100 ms in a 15 s window; the baseline's ordinary steps take 80 ms.
    const s = lossSplit({ split: split(10, 5000, 90, 9000), windowMs: 15_000 }, { split: split(1, 300, 99, 7920) })!;
    expect(s.membershipGoodput).toBeCloseTo((100 * 100) / 15_000, 12);
    expect(s.ordinaryPace).toBeCloseTo(0.8, 12);
    // Without the baseline's window there is no calm share to compare with.
    expect(s.calmShare).toBeNull();
    expect(s.membershipVsCalm).toBeNull();
    expect(lossSplit({ split: split(3, 900, 0, 0), windowMs: 1000 }, { split: split(1, 300, 99, 7920) })).toBeNull();
    expect(lossSplit({ split: split(10, 5000, 90, 9000), windowMs: 0 }, { split: split(1, 300, 99, 7920) })).toBeNull();
  });
});

describe('lossSplit against the calm share', () => {
  const split = (firstSteps: number, firstMs: number, restSteps: number, restMs: number) => ({
    first: { steps: firstSteps, medianMs: 0, totalMs: firstMs }, rest: { steps: restSteps, medianMs: 0, totalMs: restMs },
  });
  it('a calm run that pays 1 ms between 15 ms steps has a share of 15/16, and membership costs only what the churn run loses beyond it', () => {
    // Baseline: 1 first step of 60 ms and 999 of 15 ms, 1 ms between steps: 16,045 ms.
    const calm = { split: split(1, 60, 999, 14_985), windowMs: 16_045 };
    // Churn run: the same steps and gaps, plus 20 first steps of 100 ms and 500 ms of aborted work.
    const churn = { split: split(20, 2000, 980, 14_700), windowMs: 14_700 + 2000 + 1000 + 500 };
    const s = lossSplit(churn, calm)!;
    expect(s.calmShare).toBeCloseTo((1000 * 15) / 16_045, 12);
    expect(s.membershipGoodput).toBeCloseTo((1000 * 15) / 18_200, 12);
    expect(s.membershipVsCalm).toBeCloseTo(16_045 / 18_200, 12);
    expect(s.ordinaryPace).toBeCloseTo(1, 12);
  });
  it('membershipVsCalm x ordinaryPace is the steps per second with churn over without, for any runs', () => {
    const cases: [ReturnType<typeof split>, number, ReturnType<typeof split>, number][] = [
      [split(30, 7943, 2467, 152_149), 165_001, split(2, 494, 5700, 294_800), 302_000],
      [split(11, 716, 2773, 45_376), 49_000, split(2, 187, 5617, 104_487), 111_000],
      [split(7, 400, 2728, 36_409), 39_000, split(1, 50, 90, 2000), 2300],
    ];
    for (const [c, cw, b, bw] of cases) {
      const s = lossSplit({ split: c, windowMs: cw }, { split: b, windowMs: bw })!;
      const stepsPerSec = (x: ReturnType<typeof split>, w: number) => (x.first.steps + x.rest.steps) / w;
      expect(s.membershipVsCalm! * s.ordinaryPace).toBeCloseTo(stepsPerSec(c, cw) / stepsPerSec(b, bw), 12);
    }
    expect(lossSplit({ split: split(10, 5000, 90, 9000), windowMs: 15_000 }, { split: split(1, 300, 99, 7920), windowMs: 0 })!.calmShare).toBeNull();
  });
});

describe('bracketCalm', () => {
  it('takes the mean rate of a baseline before and after the churn run, their ordinary steps together, and the drift between them', () => {
    const split = (restSteps: number, restMs: number, median: number) => ({
      first: { steps: 1, medianMs: 300, totalMs: 300 }, rest: { steps: restSteps, medianMs: median, totalMs: restMs },
    });
    const b = bracketCalm({ imagesPerSec: 1200, split: split(100, 8000, 78) }, { imagesPerSec: 1000, split: split(80, 8000, 98) });
    expect(b.imagesPerSec).toBe(1100);
    expect(b.drift).toBeCloseTo(1000 / 1200 - 1, 12);
    expect(b.split).toEqual({ first: { steps: 2, medianMs: 300, totalMs: 600 }, rest: { steps: 180, medianMs: 88, totalMs: 16_000 } });
    // The ordinary pace is then against both runs' steps: 16,000 ms over 180, not either run's own.
    const churn = { first: { steps: 10, medianMs: 0, totalMs: 5000 }, rest: { steps: 90, medianMs: 0, totalMs: 9000 } };
    expect(lossSplit({ split: churn, windowMs: 15_000 }, b)!.ordinaryPace).toBeCloseTo(16_000 / 180 / 100, 12);
    expect(bracketCalm({ imagesPerSec: 0, split: split(0, 0, 0) }, { imagesPerSec: 5, split: split(1, 1, 1) }).drift).toBe(0);
    // Windows add up when both runs give theirs; else there is none.
    expect(
      bracketCalm({ imagesPerSec: 1, split: split(1, 1, 1), windowMs: 3000 }, { imagesPerSec: 1, split: split(1, 1, 1), windowMs: 2000 }).windowMs,
    ).toBe(5000);
    expect(b.windowMs).toBeUndefined();
  });
});

describe('CPU of a churn run', () => {
  it('reads own and reaped children\'s CPU from a stat line, whatever the command name holds', () => {
    const tail = 'S 1 1 1 0 -1 4194304 126 0 0 0 250 50 1200 300 20 0 1 0 1975124 3133440 391';
    expect(cpuSecondsOfStat(`4242 (node) ${tail}`)).toEqual({ own: 3, children: 15 });
    expect(cpuSecondsOfStat(`4242 (a) b) (c) ${tail}`)).toEqual({ own: 3, children: 15 });
    expect(cpuSecondsOfStat(`4242 (node) ${tail}`, 1000)).toEqual({ own: 0.3, children: 1.5 });
    expect(cpuSecondsOfStat('4242 node S 1 1')).toBeNull();
    expect(cpuSecondsOfStat('4242 (node) S 1 1 1 0 -1 4194304 126 0 0 0 x 50 1200 300')).toBeNull();
    expect(cpuSecondsOfStat('')).toBeNull();
  });

  it('splits CPU per step and what each extra start cost', () => {
    const s = cpuSplit({ cpuS: 150, steps: 1000, started: 110 }, { cpuS: 100, steps: 1000, started: 50 })!;
    expect(s.msPerStep).toBeCloseTo(150, 12);
    expect(s.baselineMsPerStep).toBeCloseTo(100, 12);
    expect(s.extraSecondsPerStart).toBeCloseTo(50 / 60, 12);
    // Fewer steps with churn: its steps are charged at the baseline's CPU per step.
    expect(cpuSplit({ cpuS: 90, steps: 800, started: 70 }, { cpuS: 100, steps: 1000, started: 50 })!.extraSecondsPerStart).toBeCloseTo(10 / 20, 12);
    expect(cpuSplit({ cpuS: 90, steps: 800, started: 50 }, { cpuS: 100, steps: 1000, started: 50 })!.extraSecondsPerStart).toBeNull();
    expect(cpuSplit({ cpuS: 90, steps: 0, started: 70 }, { cpuS: 100, steps: 1000, started: 50 })).toBeNull();
  });
});
