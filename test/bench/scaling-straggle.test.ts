// The straggler runs are measured by their means (bench/scaling-straggle.ts meanFigures): the
// simulator gives a step's expected time, and a straggled step's median sits under its mean.
import { describe, expect, it } from 'vitest';
import { meanFigures } from '../../bench/scaling-straggle.ts';
import type { StepRow } from '../../bench/scaling-run.ts';

const row = (stepMs: number, computes: number[]): StepRow => ({
  step: 1, ring: computes.length, wallMs: stepMs, stepMs, driverImagesPerSec: 0,
  peers: computes.map((computeMs) => ({ images: 10, computeMs, commMs: 1, waitMs: 0 })),
});

describe('straggler runs: mean figures', () => {
  it('means, not medians: one long step moves them', () => {
    const steps = [row(100, [80, 90]), row(100, [70, 90]), row(400, [100, 380])];
    const m = meanFigures({ steps });
    expect(m.stepS).toBeCloseTo(0.2, 12);
    expect(m.computeMeanS).toBeCloseTo((85 + 80 + 240) / 3 / 1000, 12);
    expect(() => meanFigures({ steps: [] })).toThrow(/no measured step/);
  });
});
