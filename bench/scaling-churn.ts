// Churn in the scaling simulator: the time per committed step when volunteers leave and join,
// by a seeded step-level Monte Carlo on top of simulateStep (bench/scaling-sim.ts).
//
// Sessions. Each volunteer stays for a random session (any distribution, mean M seconds) and
// is replaced by a newcomer. For many independent peers the leaves of the whole ring form,
// to a good approximation, a Poisson process of rate N / M whatever the session distribution
// (Palm-Khintchine), and joins arrive at the same rate, so only M enters here.
// A loss at time u into a step:
//   abort (today, coordinator/driver.ts): the step is dropped; after detectS (the coordinator
//     notices, the survivors form generation g+1) the SAME step runs again from scratch;
//   rerun-slice (planned, DESIGN.md "Failures"): the survivors keep their gradient sums,
//     compute the lost peer's b_j images between them (b_j / (sum c - c_j) seconds, split by
//     speed), and the new ring all-reduces the whole gradient (not overlapped); a loss during
//     the all-reduce throws away only the all-reduce; a loss after it (during the update)
//     costs nothing. When the loss comes so early that redoing the step is quicker (the
//     all-reduce after a re-run is not overlapped with backward), the step restarts instead.
// Joins wait for a step boundary: a step during which someone arrived (probability
// 1 - e^(-rate T)) is followed by an admission of joinS (checkpoint load, ring formation), in
// both systems. Abort has a closed form (restarts after memoryless losses); rerun-slice is
// simulated step by step. A ring whose steps see more than MAX_LOSSES_PER_STEP losses stalls.
import { makeRng } from '../src/rng.ts';
import { aloneThroughput, harmonic, peerSpeeds, simulateStep, type ClusterModel, type SystemModel, type Workload } from './scaling-sim.ts';

export interface ChurnModel {
  /** M: mean session of a volunteer, seconds. */
  meanSessionS: number;
  /** From a loss to the survivors' next generation running: detection + ring formation, seconds. */
  detectS: number;
  /** Admission of the joiners at a step boundary, seconds (once per step with any joiner). */
  joinS: number;
  /** Committed steps simulated. */
  steps: number;
}

export interface ChurnResult {
  /** Mean seconds per committed step, admissions included. */
  meanStepS: number;
  /** The step with no churn (simulateStep's total). */
  quietStepS: number;
  /** Losses per committed step. */
  lossesPerStep: number;
  /** Throughput with churn / sum of the peers' throughput alone (0 when stalled). */
  efficiency: number;
  /** Losses come faster than a step can finish: no step ever commits (more than MAX_LOSSES_PER_STEP per step). */
  stalled: boolean;
}

export const MAX_LOSSES_PER_STEP = 1000;

/** Exponential with rate `rate` (Infinity when the rate is 0). */
function exponential(rng: { next(): number }, rate: number): number {
  return rate > 0 ? -Math.log(1 - rng.next()) / rate : Infinity;
}

export function simulateChurn(c: ClusterModel, s: SystemModel, w: Workload, churn: ChurnModel): ChurnResult {
  if (c.share !== 1) throw new RangeError('simulateChurn: churn is simulated for peers on machines of their own (share 1)');
  if (!(churn.meanSessionS > 0 && churn.detectS >= 0 && churn.joinS >= 0 && Number.isInteger(churn.steps) && churn.steps >= 1)) {
    throw new RangeError(`simulateChurn: bad churn model ${JSON.stringify(churn)}`);
  }
  const t = simulateStep(c, s, w);
  const rate = c.peers > 1 ? c.peers / churn.meanSessionS : 0;
  const rng = makeRng(c.seed * 7919 + 17);
  const speeds = peerSpeeds(c);
  const total = speeds.reduce((a, b) => a + b, 0);
  const straggle = 1 + c.stragglerMean * harmonic(Math.max(1, c.peers - 1));
  // Re-running a lost slice: its images over the survivors' speed.
  const rerunS = (j: number) => ((w.batch * speeds[j]!) / total / (total - speeds[j]!)) * straggle;
  let meanS: number, lossesPerStep: number, stalled = false;
  if (s.onLoss === 'abort') {
    // Restarts with memoryless losses: E[time to a loss-free run of T] = (e^(rate T) - 1)(1/rate + detect).
    meanS = rate > 0 ? Math.expm1(rate * t.totalS) * (1 / rate + churn.detectS) : t.totalS;
    lossesPerStep = Math.expm1(rate * t.totalS);
    stalled = !Number.isFinite(meanS) || lossesPerStep > MAX_LOSSES_PER_STEP;
  } else {
    let elapsed = 0, losses = 0;
    for (let k = 0; k < churn.steps && !stalled; k++) {
      let now = 0, computeEnd = t.computeS, comm = t.exposedCommS, stepLosses = 0;
      for (;;) {
        const end = computeEnd + comm + t.overheadS;
        const u = now + exponential(rng, rate);
        if (u >= end) { elapsed += end; break; }
        if (++stepLosses > MAX_LOSSES_PER_STEP) { stalled = true; break; }
        const j = rng.int(speeds.length);
        // A loss during the update costs nothing: every survivor holds the sum.
        if (u < computeEnd + comm) {
          const rerunEnd = (u < computeEnd ? Math.max(computeEnd, u + churn.detectS) : u + churn.detectS) + rerunS(j);
          if (rerunEnd + t.allReduceS <= u + churn.detectS + t.computeS + t.exposedCommS) {
            computeEnd = rerunEnd;
            comm = t.allReduceS;
          } else {
            computeEnd = u + churn.detectS + t.computeS;
            comm = t.exposedCommS;
          }
        }
        // Losses while the next generation forms are absorbed by it (as in the abort formula).
        now = u + churn.detectS;
      }
      losses += stepLosses;
    }
    meanS = elapsed / churn.steps;
    lossesPerStep = losses / churn.steps;
  }
  if (stalled) return { meanStepS: Infinity, quietStepS: t.totalS, lossesPerStep: Infinity, efficiency: 0, stalled };
  // Joiners arrive at the same rate; a step during which any arrived is followed by an admission.
  const meanStepS = meanS + churn.joinS * -Math.expm1(-rate * meanS);
  return { meanStepS, quietStepS: t.totalS, lossesPerStep, stalled, efficiency: w.batch / meanStepS / aloneThroughput(c, s, w.batch) };
}
