// Learning-rate schedules as pure functions of the 0-based step index t. The trainer calls
// them on the CPU and passes the rate to the update kernel as a uniform (no readback).
//
//   warm-up, t < W:      gamma_t = gamma_0 * (s + (1 - s) * t / W)       s = warmupStartFactor
//   'poly',  W <= t < T: gamma_t = gamma_0 * (1 - (t - W) / (T - W))^power
//   'constant':          gamma_t = gamma_0
//   'step':              gamma_t = gamma_0 * stepFactor^(number of milestones <= t)
//   t >= T:              gamma_t = 0 (the run is over)
//
// 'poly' decays over the steps after warm-up so the rate is continuous at t = W (gamma_0)
// and reaches 0 at T; with W = 0 it is exactly You, Gitman, Ginsburg 2017's
// gamma_0 (1 - t/T)^2. With s = 0 the first step's rate is 0 (it only starts the momentum
// at zero); set warmupStartFactor to e.g. 1 / W to make it count.
import { OptimError } from './errors.ts';
import type { ScheduleConfig } from './types.ts';

/**
 * x^p by repeated multiplication for small integer p (the usual 2 of 'poly', milestone
 * counts), which every JS engine rounds alike; Math.pow is not required to be correctly
 * rounded, and peers on different browsers must agree on the rate to the last bit.
 */
export function powExact(x: number, p: number): number {
  if (!Number.isInteger(p) || p < 0 || p > 64) return Math.pow(x, p);
  let r = 1;
  for (let i = 0; i < p; i++) r *= x;
  return r;
}

export function learningRate(cfg: ScheduleConfig, t: number): number {
  if (!Number.isInteger(t) || t < 0) throw new OptimError('bad-input', `step index t must be an integer >= 0, got ${t}`);
  const { lr, warmupSteps: W, totalSteps: T } = cfg;
  if (t >= T) return 0;
  if (t < W) return lr * (cfg.warmupStartFactor + (1 - cfg.warmupStartFactor) * (t / W));
  switch (cfg.schedule) {
    case 'poly':
      return lr * powExact(1 - (t - W) / (T - W), cfg.power);
    case 'constant':
      return lr;
    case 'step':
      return lr * powExact(cfg.stepFactor, cfg.stepMilestones.filter((m) => m <= t).length);
  }
}
