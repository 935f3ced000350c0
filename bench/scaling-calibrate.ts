// Calibrates the scaling simulator (bench/scaling-sim.ts) on measured runs, and says how well
// it then predicts them. Pure functions; seconds and bytes.
//
// Each run: N peers on one machine (share 1/N each), global batch B, and per step (medians):
// the slowest peer's compute, the peers' mean compute, the all-reduce (the last peer in) and the
// step. The simulator's parameters come out one part at a time, each by least squares:
//   straggler mu  slowest / mean compute = (1 + mu H_N) / (1 + mu): with nu = mu / (1 + mu),
//                 slowest - mean = nu * mean (H_N - 1), a line through the origin (N >= 2);
//   speed c       mean compute = B (1 + mu) / (N share) * (1/c), through the origin;
//   link          all-reduce = 2(N-1) alpha + 2(N-1)/N S (1/bw) (bench/scaling-model.ts fitComm),
//                 over the runs and the latency probes: rings of the same sizes all-reducing a
//                 gradient ~1,000x smaller (the tiny CNN's 1.5 KB), whose time is almost all
//                 alpha. Without them both columns grow with N alike (the runs' S is one size),
//                 so the fit can trade latency for bandwidth; with them each is pinned down;
//   overhead      step - slowest - all-reduce = o + o_peer / share, both >= 0 (the coordinator's
//                 part, and each peer's update + checksum that N peers on one machine pay N times).
// Validation: the simulator with these parameters predicts each run's step time; the error is
// the largest |predicted - measured| / measured. With runs at two or more global batches, each
// batch is also predicted by a fit to the OTHER batches only (held out: compute scales with B,
// so this tests the model's structure, not only its fit; the latency probes, of another model,
// stay in every fit).
import { fitComm, FitError, ringBytesPerPeer } from './scaling-model.ts';
import type { LinkModel } from './scaling-collective.ts';
import type { ModelProfile } from './scaling-profile.ts';
import { harmonic, simulateStep, type SystemModel } from './scaling-sim.ts';
import { DEFAULT_TWO_LEVEL_FROM } from '../coordinator/two-level.ts';
import { DEFAULT_BUCKET_BYTES, DEFAULT_LAST_BUCKET_BYTES } from '../src/nn/buckets.ts';
import { MAX_STEAL_FRACTION } from '../coordinator/tail-pool.ts';

export interface MeasuredRun {
  peers: number;
  batch: number;
  /** Share of the machine each peer had (1/N for N local peers). */
  share: number;
  computeCriticalS: number;
  computeMeanS: number;
  allReduceS: number;
  stepS: number;
}

/** A ring that all-reduced a small gradient (the latency probe): what pins alpha down. */
export interface CommProbe {
  peers: number;
  /** Bytes all-reduced per step (the probe model's whole gradient). */
  gradBytes: number;
  allReduceS: number;
}

export interface Calibration {
  imagesPerSecPerPeer: number;
  stragglerMean: number;
  link: LinkModel;
  comm: 'latency+bandwidth' | 'bandwidth only';
  overheadS: number;
  overheadPerPeerS: number;
}

export interface Validation {
  /** Per run: the simulator's step time, calibrated on all runs, with the run's own measured speed (see validate). */
  predictedS: number[];
  /** max |predicted - measured| / measured over the runs. */
  maxRelError: number;
  /** The same where each batch is predicted by a calibration on the OTHER batches; null with one batch. */
  heldOutMaxRelError: number | null;
  heldOutPredictedS: (number | null)[];
  /** With one speed c for every run instead of each run's own (machine load drifts between runs here). */
  fixedSpeedPredictedS: number[];
  fixedSpeedMaxRelError: number;
}

const dot = (u: readonly number[], v: readonly number[]) => u.reduce((s, x, i) => s + x * v[i]!, 0);

/** Least squares y = a + b x with a, b >= 0 (the better admissible of: both, a alone, b alone). */
function fitNonNegativeLine(x: readonly number[], y: readonly number[]): { a: number; b: number } {
  const n = x.length;
  const sse = (a: number, b: number) => y.reduce((s, yi, i) => s + (yi - a - b * x[i]!) ** 2, 0);
  const cands: { a: number; b: number }[] = [{ a: Math.max(0, y.reduce((s, v) => s + v, 0) / n), b: 0 }];
  const xx = dot(x, x);
  if (xx > 0) cands.push({ a: 0, b: Math.max(0, dot(x, y) / xx) });
  const mx = x.reduce((s, v) => s + v, 0) / n, my = y.reduce((s, v) => s + v, 0) / n;
  const sxx = x.reduce((s, v) => s + (v - mx) ** 2, 0);
  if (sxx > 1e-12 * Math.max(1, xx)) {
    const b = x.reduce((s, v, i) => s + (v - mx) * (y[i]! - my), 0) / sxx;
    const a = my - b * mx;
    if (a >= 0 && b >= 0) cands.push({ a, b });
  }
  return cands.reduce((best, c) => (sse(c.a, c.b) < sse(best.a, best.b) ? c : best));
}

export function calibrate(runs: readonly MeasuredRun[], gradBytes: number, probes: readonly CommProbe[] = []): Calibration {
  if (runs.length === 0) throw new FitError('no runs to calibrate on');
  for (const p of probes) {
    if (!(Number.isInteger(p.peers) && p.peers >= 2 && p.gradBytes > 0 && p.allReduceS >= 0 && Number.isFinite(p.allReduceS))) {
      throw new FitError(`latency probe ${JSON.stringify(p)} is unusable: `
        + 'it needs a ring of 2 or more peers, a gradient of > 0 bytes and a finite all-reduce time >= 0');
    }
  }
  for (const r of runs) {
    if (!(Number.isInteger(r.peers) && r.peers >= 1 && r.batch > 0 && r.share > 0 && r.share <= 1
      && r.computeCriticalS > 0 && r.computeMeanS > 0 && r.allReduceS >= 0 && r.stepS > 0)) {
      throw new FitError(`run with N = ${r.peers} has unusable figures ${JSON.stringify(r)}: every time must be finite, compute and step > 0, share in (0, 1]`);
    }
  }
  const multi = runs.filter((r) => r.peers >= 2);
  if (multi.length === 0) throw new FitError('no run with 2 or more peers: the all-reduce cannot be fitted (run with --peers 1,2,... )');
  const sx = multi.map((r) => r.computeMeanS * (harmonic(r.peers) - 1));
  const nu = Math.min(0.9, Math.max(0, dot(sx, multi.map((r) => r.computeCriticalS - r.computeMeanS)) / dot(sx, sx)));
  const stragglerMean = nu / (1 - nu);
  const cx = runs.map((r) => (r.batch * (1 + stragglerMean)) / (r.peers * r.share));
  const invC = dot(cx, runs.map((r) => r.computeMeanS)) / dot(cx, cx);
  const comms = [...multi.map((r) => ({ peers: r.peers, gradBytes, allReduceS: r.allReduceS })), ...probes];
  const comm = fitComm(comms.map((r) => 2 * (r.peers - 1)), comms.map((r) => ringBytesPerPeer(r.peers, r.gradBytes)), comms.map((r) => r.allReduceS));
  const o = fitNonNegativeLine(runs.map((r) => 1 / r.share), runs.map((r) => r.stepS - r.computeCriticalS - r.allReduceS));
  return {
    imagesPerSecPerPeer: 1 / invC, stragglerMean, link: { latencyS: comm.alpha, bandwidthBytesPerS: 1 / comm.invBw }, comm: comm.kind,
    overheadS: o.a, overheadPerPeerS: o.b,
  };
}

/**
 * The system as the code runs it, with a calibration's overheads: the job defaults of
 * coordinator/job.ts and src/client/sync-step.ts (buckets of DEFAULT_BUCKET_BYTES all-reduced as
 * backward completes them, the last of them cut at DEFAULT_LAST_BUCKET_BYTES, work stealing
 * where it is faster (steal auto; its micro-batch cost, microBatchS, is the caller's), the
 * two-level collective from DEFAULT_TWO_LEVEL_FROM peers, a lost peer costs its slice:
 * coordinator/slice-rerun.ts), float32 frames.
 */
/**
 * Today's system. `wireScale` 1: float32 frames, as the measured runs here send them (the fit);
 * 0.5: the bf16 frames of a job that npm start creates (the predictions).
 */
export function currentSystem(cal: Pick<Calibration, 'overheadS' | 'overheadPerPeerS'>, wireScale = 1): SystemModel {
  return {
    topology: 'two-level', twoLevelFrom: DEFAULT_TWO_LEVEL_FROM, overlap: true, bucketBytes: [DEFAULT_BUCKET_BYTES], lastBucketBytes: DEFAULT_LAST_BUCKET_BYTES,
    onLoss: 'rerun-slice',
    steal: { fraction: MAX_STEAL_FRACTION, auto: true },
    overheadS: cal.overheadS, overheadPerPeerS: cal.overheadPerPeerS, wireScale,
  };
}

/**
 * What the measured runs' jobs set on top of the defaults: the small CNN's gradient in ONE bucket
 * (no last-bucket cut), ready when backward ends, and no work stealing, so that a run's step is its compute, its whole
 * all-reduce and the overhead, as the calibration above splits it.
 */
export const MEASURED_JOB = { lastBucketBytes: 0, stealFraction: 0 } as const;

/** Today's system as the measured runs configure it (MEASURED_JOB), float32 frames. */
export const measuredSystem = (cal: Pick<Calibration, 'overheadS' | 'overheadPerPeerS'>): SystemModel => ({
  ...currentSystem(cal), lastBucketBytes: MEASURED_JOB.lastBucketBytes, steal: undefined,
});

/** The simulator's step time for a measured run's configuration (measuredSystem); `speed` overrides c. */
export function predictRun(
  cal: Calibration, run: Pick<MeasuredRun, 'peers' | 'batch' | 'share'>, profile: ModelProfile, speed = cal.imagesPerSecPerPeer,
): number {
  return simulateStep(
    { peers: run.peers, imagesPerSecPerPeer: speed, speedSigma: 0, stragglerMean: cal.stragglerMean, share: run.share, link: cal.link, seed: 1 },
    measuredSystem(cal), { batch: run.batch, profile },
  ).totalS;
}

/** The speed c a run's mean compute implies given the straggler mu: B (1 + mu) / (N share mean). */
export const runSpeed = (r: MeasuredRun, stragglerMean: number) => (r.batch * (1 + stragglerMean)) / (r.peers * r.share * r.computeMeanS);

/**
 * How well the calibrated simulator reproduces the runs. The per-peer speed is an input of the
 * simulator (a property of the volunteers' machines) and the bench measures it in every run (the
 * peers' mean compute); here the cores are shared with other work whose load drifts between
 * runs, so each run is predicted with its own measured speed, and every other part (slowest
 * peer, all-reduce, overhead) from the calibration. fixedSpeed*: one c for all runs.
 */
export function validate(runs: readonly MeasuredRun[], profile: ModelProfile, probes: readonly CommProbe[] = []): Validation {
  const rel = (p: number, r: MeasuredRun) => Math.abs(p - r.stepS) / r.stepS;
  const maxRel = (ps: readonly number[]) => Math.max(...ps.map((p, i) => rel(p, runs[i]!)));
  const cal = calibrate(runs, profile.gradBytes, probes);
  const predictedS = runs.map((r) => predictRun(cal, r, profile, runSpeed(r, cal.stragglerMean)));
  const fixedSpeedPredictedS = runs.map((r) => predictRun(cal, r, profile));
  const batches = [...new Set(runs.map((r) => r.batch))];
  let heldOutPredictedS: (number | null)[] = runs.map(() => null);
  if (batches.length >= 2) {
    heldOutPredictedS = runs.map((r) => {
      const others = runs.filter((o) => o.batch !== r.batch);
      if (!others.some((o) => o.peers >= 2)) return null;
      const c = calibrate(others, profile.gradBytes, probes);
      return predictRun(c, r, profile, runSpeed(r, c.stragglerMean));
    });
  }
  const held = heldOutPredictedS.flatMap((p, i) => (p === null ? [] : [rel(p, runs[i]!)]));
  return {
    predictedS, maxRelError: maxRel(predictedS),
    heldOutMaxRelError: held.length ? Math.max(...held) : null, heldOutPredictedS,
    fixedSpeedPredictedS, fixedSpeedMaxRelError: maxRel(fixedSpeedPredictedS),
  };
}
