// Training time to a target on a link profile, from two measured things: the top-1 curve of a
// run (against steps; the maths of a run does not depend on the link) and the seconds per step
// that the same mode takes on that profile (a real run of a window of steps there).
//
// The link's rate does not enter the maths: a step's ids come from (seed, step) whatever the
// link. Only the split of the ids over the peers follows measured speed, and with it the float
// rounding of the sums (sync) or each peer's share (rounds); so two runs' curves differ by that
// run-to-run noise (here about a point of top-1 on 2,000 test images mid-run, 0.05 at the end on
// 10,000), on a fast link or a slow one alike, and the time axis is what the link changes. With a sync
// warm-up (job syncWarmup W) a rounds job's first W steps run at sync's rate on that profile.
import type { RunResult } from './lowcomm-run.ts';

/** Seconds per step of one mode on one profile, measured over a window of steps. */
export interface StepRate {
  secondsPerStep: number;
  /** Steps the rate was measured over (after the first committed event). */
  steps: number;
}

/**
 * Seconds per step in a timing run: from its first committed event (the ring's start-up and the
 * first step or round left out) to its last, over the steps between. Null with fewer than two
 * events (the window was too short for the mode's H).
 */
export function measuredRate(r: RunResult): StepRate | null {
  const s = r.steps;
  if (s.length < 2) return null;
  const first = s[0]!;
  const last = s[s.length - 1]!;
  const steps = last.step - first.step;
  if (steps <= 0) return null;
  return { secondsPerStep: (last.seconds - first.seconds) / steps, steps };
}

/** Training seconds of the first `step` steps: the first `syncWarmup` at sync's rate, the rest at the mode's. */
export function projectedSeconds(step: number, syncWarmup: number, sync: StepRate, mode: StepRate): number {
  const warm = Math.min(step, syncWarmup);
  return warm * sync.secondsPerStep + (step - warm) * mode.secondsPerStep;
}

/**
 * Projected training seconds until the curve of `accuracy` first reaches `target` on a profile
 * (null: never). `syncWarmup` applies to rounds only (a sync run has H = 1).
 */
export function projectedTimeToTarget(accuracy: RunResult, target: number, syncWarmup: number, sync: StepRate, mode: StepRate): number | null {
  const H = accuracy.syncEvery;
  if (H === 'auto') throw new RangeError('a run with syncEvery "auto" changes H as it goes: its time is measured, not projected');
  const hit = accuracy.evals.find((e) => e.top1 >= target);
  if (!hit) return null;
  return projectedSeconds(hit.step, warmupOf(H, syncWarmup), sync, mode);
}

/** The sync steps before the first round of a mode: the job's warm-up for rounds, none for sync itself. */
export function warmupOf(syncEvery: number, syncWarmup: number): number {
  return syncEvery > 1 ? syncWarmup : 0;
}

/** Steps in the timing window of a mode: at least three rounds (two intervals), and at least `min`. */
export function timingSteps(syncEvery: number, min: number): number {
  return Math.max(min, 3 * syncEvery);
}
