// The driver's phase clock (where a job's time goes, as the churn bench reports it) and the
// churn bench's window over two of its readings.
import { describe, expect, it } from 'vitest';
import { PhaseClock } from '../../coordinator/driver-types.ts';
import { phaseWindow } from '../../bench/churn-run.ts';

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
