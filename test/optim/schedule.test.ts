import { describe, expect, it } from 'vitest';
import { OptimError } from '../../src/optim/errors.ts';
import { learningRate } from '../../src/optim/schedule.ts';
import type { ScheduleConfig } from '../../src/optim/types.ts';

const base: ScheduleConfig = {
  schedule: 'poly', lr: 2, warmupSteps: 10, warmupStartFactor: 0.1, totalSteps: 110, power: 2, stepMilestones: [], stepFactor: 0.1,
};

describe('learningRate', () => {
  it('poly: warm-up from lr * start factor, lr at the end of warm-up, 0 at T', () => {
    expect(learningRate(base, 0)).toBeCloseTo(0.2, 15);
    expect(learningRate(base, 5)).toBeCloseTo(2 * (0.1 + 0.9 * 0.5), 15);
    expect(learningRate(base, 9)).toBeCloseTo(2 * (0.1 + 0.9 * 0.9), 15);
    expect(learningRate(base, 10)).toBe(2);
    expect(learningRate(base, 60)).toBeCloseTo(2 * 0.25, 15);
    expect(learningRate(base, 109)).toBeCloseTo(2 * (1 / 100) ** 2, 15);
    expect(learningRate(base, 110)).toBe(0);
    expect(learningRate(base, 1000)).toBe(0);
  });

  it('poly without warm-up is the paper formula gamma_0 (1 - t/T)^2', () => {
    const cfg = { ...base, warmupSteps: 0 };
    for (const t of [0, 1, 37, 99, 109]) expect(learningRate(cfg, t)).toBeCloseTo(2 * (1 - t / 110) ** 2, 14);
  });

  it('warm-up from 0 by default starts at 0', () => {
    expect(learningRate({ ...base, warmupStartFactor: 0 }, 0)).toBe(0);
    expect(learningRate({ ...base, warmupStartFactor: 0 }, 5)).toBe(1);
  });

  it('the rate never increases after warm-up and never goes negative', () => {
    let prev = Infinity;
    for (let t = 10; t <= 120; t++) {
      const r = learningRate(base, t);
      expect(r).toBeLessThanOrEqual(prev);
      expect(r).toBeGreaterThanOrEqual(0);
      prev = r;
    }
  });

  it('constant and step schedules share the warm-up', () => {
    const c = { ...base, schedule: 'constant' as const };
    expect(learningRate(c, 0)).toBeCloseTo(0.2, 15);
    expect(learningRate(c, 10)).toBe(2);
    expect(learningRate(c, 109)).toBe(2);
    expect(learningRate(c, 110)).toBe(0);
    const s = { ...base, schedule: 'step' as const, stepMilestones: [30, 80] };
    expect(learningRate(s, 29)).toBe(2);
    expect(learningRate(s, 30)).toBeCloseTo(0.2, 15);
    expect(learningRate(s, 79)).toBeCloseTo(0.2, 15);
    expect(learningRate(s, 80)).toBeCloseTo(0.02, 15);
    expect(learningRate(s, 110)).toBe(0);
  });

  it('rejects a negative or fractional step index', () => {
    for (const t of [-1, 0.5, NaN]) expect(() => learningRate(base, t)).toThrow(OptimError);
  });
});
