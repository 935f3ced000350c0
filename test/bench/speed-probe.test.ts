// The machine-speed probe beside the churn bench (bench/speed-probe.ts): its output parsed, the
// median over a run's window, and a real probe process that reports CPU time of its loop.
import { describe, expect, it } from 'vitest';
import { SpeedProbe, parseSamples, speedBetween } from '../../bench/speed-probe.ts';

describe('speed probe', () => {
  it('parses "<epoch ms> <cpu us> <bit>" lines, skipping broken ones', () => {
    expect(parseSamples('1000 12000 1\n1500 abc 0\n\n2000 15000 0\n2500 0 1\n3000 9000')).toEqual([
      { at: 1000, cpuMs: 12 }, { at: 2000, cpuMs: 15 }, { at: 3000, cpuMs: 9 },
    ]);
  });

  it('gives the median CPU ms of the samples in a window, null for none', () => {
    const s = [{ at: 10, cpuMs: 5 }, { at: 20, cpuMs: 9 }, { at: 30, cpuMs: 7 }, { at: 40, cpuMs: 100 }];
    expect(speedBetween(s, 10, 30)).toBe(7);
    expect(speedBetween(s, 31, 39)).toBeNull();
  });

  it('a real probe reports a positive CPU time per loop, a few times a second when asked', async () => {
    const p = new SpeedProbe(100);
    const t0 = Date.now();
    try {
      while (p.samples.length < 3 && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 100));
    } finally {
      p.stop();
    }
    const s = p.samples;
    expect(s.length).toBeGreaterThanOrEqual(3);
    for (const x of s) {
      expect(x.cpuMs).toBeGreaterThan(0.1);
      expect(x.cpuMs).toBeLessThan(5000);
      expect(x.at).toBeGreaterThanOrEqual(t0);
    }
    expect(speedBetween(s, t0, Date.now())).not.toBeNull();
  }, 30_000);
});
