// The outer step of low-communication rounds (DiLoCo: Douillard et al. 2023; OpenDiLoCo,
// INTELLECT-1). With `syncEvery` H > 1 every peer runs H inner steps from the round's start
// weights w0 on its own share of the round's samples; the ring then sums the pseudo-gradients
// weighted by the images each peer processed, and every peer applies the same outer step:
//
//   d = (sum_i images_i (w0 - w_i)) / sum_i images_i       (the images-weighted mean change)
//   u <- mu u + d;   w <- w0 - lr (d + mu u)                 (SGD with Nesterov momentum)
//
// The inner momentum across rounds (job momentumCarry rho): absent, each peer keeps its own, as
// DiLoCo does. With rho, every peer sets its inner momentum after the outer step to
//
//   v = rho (1 - m) / (m (1 - m^H')) d
//
// (m the inner momentum, H' the round's inner steps): the momentum that alone, with no further
// gradient, would move the weights by rho d over the next H' steps. All peers then start the
// next round with the same momentum, made from the sum the ring already made (no extra bytes).
// Sync SGD's own momentum carries m (1 - m^H) / (H (1 - m)) of the last H steps' change
// (0.64 at H = 8, m = 0.9); rho above that is an outer momentum of its own. Chosen by a PyTorch
// search (bench/gpu/lowcomm_sweep.py, 4 peers, small CNN, CIFAR-10 subset, 5 seeds, 780 steps):
// at H = 8 sync 63.0%, own momenta 59.2%, rho 0.64 61.1%, rho 0.77 63.0%, rho 0.80 62.8%, rho
// 0.96 diverged (47%).
//
// Like the inner optimiser (host.ts), this is plain IEEE arithmetic in index order, float64
// inside and float32 where stored, so every peer that holds the same sum gets the same bits on
// any backend. H = 1 never comes here: the sync path is today's exact synchronous SGD.
import { OptimError } from './errors.ts';

export interface OuterConfig {
  /** H: inner steps between synchronisations (1: exact synchronous SGD, no rounds). */
  syncEvery: number;
  /** The outer rate (DiLoCo: 0.7). */
  lr: number;
  /** The outer Nesterov momentum (DiLoCo: 0.9). */
  momentum: number;
  /** Steps of exact sync SGD before the first round (DiLoCo and post-local SGD start rounds from a trained model). */
  warmup: number;
  /**
   * rho in [0, 1): after each round every peer's inner momentum is set from the round's mean
   * change (carriedMomentum). Absent: each peer keeps its own inner momentum.
   */
  carry?: number;
  /**
   * H is chosen by the coordinator as the job runs (the job's syncEvery "auto",
   * coordinator/sync-auto.ts): any of 1 .. syncEvery (AUTO_SYNC_MAX), changed at round boundaries.
   */
  auto?: true;
}

/** DiLoCo's outer optimiser: Nesterov momentum 0.9, rate 0.7. */
export const OUTER_DEFAULTS: OuterConfig = { syncEvery: 1, lr: 0.7, momentum: 0.9, warmup: 0 };
/** The longest round syncEvery "auto" picks: rounds of 8 with the momentum carry ended above sync on slow links, 32 below. */
export const AUTO_SYNC_MAX = 8;
/** The longest round: ids of every inner step travel in one assignment message. */
export const MAX_SYNC_EVERY = 1024;

/** Checks an outer config (job files and the CLI); throws OptimError saying what is allowed. */
export function checkOuterConfig(c: OuterConfig): OuterConfig {
  if (!Number.isInteger(c.syncEvery) || c.syncEvery < 1 || c.syncEvery > MAX_SYNC_EVERY) {
    throw new OptimError('bad-config', `syncEvery must be an integer in [1, ${MAX_SYNC_EVERY}] (1: every step synchronised), got ${c.syncEvery}`);
  }
  if (!Number.isFinite(c.lr) || c.lr <= 0 || c.lr > 10) {
    throw new OptimError('bad-config', `the outer rate must be a number in (0, 10] (DiLoCo uses 0.7), got ${c.lr}`);
  }
  if (!Number.isFinite(c.momentum) || c.momentum < 0 || c.momentum >= 1) {
    throw new OptimError('bad-config', `the outer momentum must be a number in [0, 1) (DiLoCo uses 0.9), got ${c.momentum}`);
  }
  if (!Number.isInteger(c.warmup) || c.warmup < 0) {
    throw new OptimError('bad-config', `the sync warm-up before the first round must be a whole number of steps >= 0, got ${c.warmup}`);
  }
  if (c.carry !== undefined && !(Number.isFinite(c.carry) && c.carry >= 0 && c.carry < 1)) {
    throw new OptimError('bad-config', "the momentum carry must be a number in [0, 1) (the share of a round's change the next round's momentum carries; "
      + `0.75 measured best, 1 and more grows without bound), got ${c.carry}`);
  }
  return c;
}

/**
 * This peer's contribution to the round's sum: out[i] = images * (w0[i] - w[i]) in float32.
 * A peer that processed no images contributes zeros (and weighs nothing in the mean).
 */
export function weightedChange(w0: Float32Array, w: Float32Array, images: number, out: Float32Array): Float32Array {
  if (w.length !== w0.length || out.length !== w0.length) {
    throw new OptimError('bad-input', `w0, w and out must have the same length, got ${w0.length}, ${w.length}, ${out.length}`);
  }
  if (!Number.isInteger(images) || images < 0) throw new OptimError('bad-input', `images must be an integer >= 0, got ${images}`);
  for (let i = 0; i < w0.length; i++) out[i] = images * (w0[i]! - w[i]!);
  return out;
}

/**
 * The outer Nesterov step in place: `w` holds w0 on entry and the round's result on return,
 * `u` is the outer momentum; `sum` is the ring's sum of weightedChange over `images` images.
 */
export function outerStep(c: OuterConfig, w: Float32Array, u: Float32Array, sum: Float32Array, images: number): void {
  const n = w.length;
  if (u.length !== n || sum.length !== n) throw new OptimError('bad-input', `w, u and sum must have the same length, got ${n}, ${u.length}, ${sum.length}`);
  if (!Number.isInteger(images) || images < 1) throw new OptimError('bad-input', `a round needs at least one image, got ${images}`);
  const { lr, momentum: mu } = c;
  for (let i = 0; i < n; i++) {
    const d = sum[i]! / images;
    const ui = Math.fround(mu * u[i]! + d);
    u[i] = ui;
    w[i] = w[i]! - lr * (d + mu * ui);
  }
}

/**
 * The inner momentum every peer takes after a round (OuterConfig.carry), in place into `v`:
 * v[i] = rho (1 - m) / (m (1 - m^H')) * sum[i] / images, float64 inside, float32 stored, so
 * every peer with the same sum gets the same bits. m = 0 (no inner momentum): v = 0. (With
 * Nesterov inner SGD the same v moves the weights by m R d, its look-ahead taking one factor m.)
 */
export function carriedMomentum(v: Float32Array, sum: Float32Array, images: number, innerSteps: number, m: number, rho: number): void {
  const n = v.length;
  if (sum.length !== n) throw new OptimError('bad-input', `v and sum must have the same length, got ${n} and ${sum.length}`);
  if (!Number.isInteger(images) || images < 1) throw new OptimError('bad-input', `a round needs at least one image, got ${images}`);
  if (!Number.isInteger(innerSteps) || innerSteps < 1 || innerSteps > MAX_SYNC_EVERY) {
    throw new OptimError('bad-input', `innerSteps must be an integer in [1, ${MAX_SYNC_EVERY}], got ${innerSteps}`);
  }
  if (!(m >= 0 && m < 1)) throw new OptimError('bad-input', `the inner momentum must be in [0, 1), got ${m}`);
  if (!(rho >= 0 && rho < 1)) throw new OptimError('bad-input', `rho must be in [0, 1), got ${rho}`);
  if (m === 0) {
    v.fill(0);
    return;
  }
  // m^H' by repeated multiplication for every H' (schedule.ts's powExact falls back to Math.pow
  // past 64, which engines need not round alike): peers must agree on c to the last bit.
  let mH = 1;
  for (let k = 0; k < innerSteps; k++) mH *= m;
  const c = (rho * (1 - m)) / (m * (1 - mH));
  for (let i = 0; i < n; i++) v[i] = c * (sum[i]! / images);
}
