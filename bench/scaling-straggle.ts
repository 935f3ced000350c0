// The scaling bench's straggler runs: what work stealing (coordinator/tail-pool.ts) buys when
// peers are slowed at random, measured here and predicted by the simulator. A ring of two (one
// core each here, so that a peer that waits frees nothing for the other) trains with injected
// stragglers (each volunteer's --straggle MU: every step it computes 1 + X times slower, X
// exponential of mean MU, the simulator's own straggler model), once without and once with
// stealing (stealFraction PREDICT_STEAL_FRACTION). The simulator, calibrated on the ordinary runs,
// predicts both step times with the straggler mean MU plus the contention fitted there, and the
// speed the run without stealing measured.
import type { Calibration, MeasuredRun } from './scaling-calibrate.ts';
import { currentSystem, runSpeed } from './scaling-calibrate.ts';
import { PREDICT_STEAL_FRACTION } from './scaling-predict.ts';
import type { ModelProfile } from './scaling-profile.ts';
import { runRing, type RunContext, type RunSummary } from './scaling-run.ts';
import { simulateStep } from './scaling-sim.ts';

export const STRAGGLE_PEERS = 2;

export interface StraggleResult {
  mu: number;
  peers: number;
  batch: number;
  /** Without stealing, then with it. */
  runs: [RunSummary, RunSummary];
  measuredS: [number, number];
  predictedS: [number, number];
  /** |predicted - measured| / measured, each. */
  errors: [number, number];
  /** Step time without stealing over step time with it. */
  measuredSpeedup: number;
  predictedSpeedup: number;
}

/** Runs the ring of two with stragglers of mean `mu`, without and with stealing (Node volunteers, as the other runs). */
export async function straggleRuns(mu: number, o: RunContext): Promise<[RunSummary, RunSummary]> {
  const args = ['--straggle', String(mu)];
  const plain = await runRing(STRAGGLE_PEERS, { ...o, tag: 'straggle', volunteerArgs: args });
  const steal = await runRing(STRAGGLE_PEERS, { ...o, tag: 'straggle-steal', volunteerArgs: args, job: { stealFraction: PREDICT_STEAL_FRACTION } });
  return [plain, steal];
}

/** The simulator's step times for the two straggler runs, given the calibration of the ordinary runs. */
export function predictStraggle(cal: Calibration, profile: ModelProfile, mu: number, runs: [RunSummary, RunSummary]): StraggleResult {
  const [plain, steal] = runs;
  const asMeasured = (r: RunSummary): MeasuredRun => ({ peers: r.peers, batch: r.batch, share: 1 / r.peers, computeCriticalS: r.computeCriticalMs / 1000, computeMeanS: r.computeMs / 1000, allReduceS: r.allReduceMs / 1000, stepS: r.stepMs / 1000 });
  // Injected and contention slowdowns, both per step: their means add.
  const straggler = mu + cal.stragglerMean;
  const speed = runSpeed(asMeasured(plain), straggler);
  const cluster = { peers: plain.peers, imagesPerSecPerPeer: speed, speedSigma: 0, stragglerMean: straggler, share: 1 / plain.peers, link: cal.link, seed: 1 };
  const w = { batch: plain.batch, profile };
  const system = currentSystem(cal);
  const predictedS: [number, number] = [simulateStep(cluster, system, w).totalS, simulateStep(cluster, { ...system, steal: { fraction: PREDICT_STEAL_FRACTION } }, w).totalS];
  const measuredS: [number, number] = [plain.stepMs / 1000, steal.stepMs / 1000];
  return {
    mu, peers: plain.peers, batch: plain.batch, runs, measuredS, predictedS,
    errors: [Math.abs(predictedS[0] - measuredS[0]) / measuredS[0], Math.abs(predictedS[1] - measuredS[1]) / measuredS[1]],
    measuredSpeedup: measuredS[0] / measuredS[1], predictedSpeedup: predictedS[0] / predictedS[1],
  };
}
