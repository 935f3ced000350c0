// The scaling bench's straggler runs: what work stealing (coordinator/tail-pool.ts) buys when
// peers are slowed at random, measured here and predicted by the simulator. A ring of two (one
// core each here, so that a peer that waits frees nothing for the other) trains with injected
// stragglers (each volunteer's --straggle MU: every step it computes 1 + X times slower, X
// exponential of mean MU, the simulator's own straggler model), once without and once with
// stealing (stealFraction PREDICT_STEAL_FRACTION). The simulator, calibrated on the ordinary runs,
// predicts both step times with the straggler mean MU plus the contention fitted there, and the
// speed the run without stealing measured. The simulator gives a step's EXPECTED time, so these
// runs are measured by their means (the ordinary runs by medians, robust to the odd hiccup): a
// step that waits for the slower of two exponential slowdowns is skewed, its median under its
// mean. A straggled step varies by ~30% here, so these runs take STRAGGLE_STEP_FACTOR times the
// ordinary runs' steps (a mean of 32 steps: a standard error of ~5%).
import { measuredSystem, runSpeed, type Calibration } from './scaling-calibrate.ts';
import { PREDICT_STEAL_FRACTION } from './scaling-predict.ts';
import type { ModelProfile } from './scaling-profile.ts';
import { MODEL, asMeasured, mean, runRing, type RunContext, type RunSummary } from './scaling-run.ts';
import { simulateStep } from './scaling-sim.ts';
import { median } from './timing.ts';
import { getDevice } from '../src/gpu/device.ts';
import { WebGpuEngine } from '../src/backend/webgpu.ts';
import { Model } from '../src/nn/model.ts';
import { modelByName } from '../src/nn/models.ts';
import { recordGradients } from '../src/train/step.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { MIN_CHUNK } from '../coordinator/tail-pool.ts';

export const STRAGGLE_PEERS = 2;
/** The straggler runs measure this many times the ordinary runs' steps. */
export const STRAGGLE_STEP_FACTOR = 4;

/** A straggler run's mean step (s) and mean per-peer compute (s) over its measured steps. */
export function meanFigures(r: Pick<RunSummary, 'steps'>): { stepS: number; computeMeanS: number } {
  if (r.steps.length === 0) throw new RangeError('meanFigures: a run with no measured step');
  return { stepS: mean(r.steps.map((x) => x.stepMs)) / 1000, computeMeanS: mean(r.steps.map((x) => mean(x.peers.map((p) => p.computeMs)))) / 1000 };
}

export interface StraggleResult {
  mu: number;
  peers: number;
  batch: number;
  /** Without stealing, then with it. */
  runs: [RunSummary, RunSummary];
  /** Mean step time (s) of each run. */
  measuredS: [number, number];
  predictedS: [number, number];
  /** |predicted - measured| / measured, each. */
  errors: [number, number];
  /** Step time without stealing over step time with it. */
  measuredSpeedup: number;
  predictedSpeedup: number;
  /** The fixed cost of a micro-batch (s, this machine to itself), measured apart (microBatchCost). */
  microBatchS: number;
}

/**
 * What a micro-batch costs beyond its images, on this machine's WebGPU with the machine to
 * itself: a peer's share of a step (`images`) computed as one batch against the same images as a
 * stealing member computes them (its fixed quarter, a chunk, then the rest as its final grant),
 * run in pairs, in turn; the median of the pairs' differences over the two extra micro-batches
 * (the load here drifts: paired differences see the same load, medians of each way do not).
 */
export async function microBatchCost(images: number, reps = 15): Promise<number> {
  const gpu = await getDevice();
  const model = new Model(new WebGpuEngine(gpu), modelByName(MODEL, [1, 28, 28], 10), { seed: 1 });
  const rng = makeRng(1);
  const fixed = Math.max(1, Math.round(images / 4));
  const chunk = Math.min(MIN_CHUNK, Math.max(1, images - fixed - 1));
  const parts = [fixed, chunk, images - fixed - chunk];
  const tensors = new Map<number, ReturnType<typeof gpu.upload>>();
  const x = (n: number) => {
    if (!tensors.has(n)) tensors.set(n, gpu.upload(uniformF32(rng, n * 784), [n, 1, 28, 28]));
    return tensors.get(n)!;
  };
  const run = async (sizes: readonly number[]): Promise<number> => {
    const t0 = performance.now();
    for (const [i, n] of sizes.entries()) {
      gpu.write(model.labelsTensor(n), Int32Array.from({ length: n }, () => rng.int(10)));
      await gpu.readF32(recordGradients(model, x(n), 1, 0, i > 0));
    }
    return performance.now() - t0;
  };
  // Paired, in turn (whole-split, then split-whole): each pair's difference sees the same load.
  const diffs: number[] = [];
  try {
    for (let r = 0; r < reps + 2; r++) {
      let wholeMs: number, splitMs: number;
      if (r % 2 === 0) {
        wholeMs = await run([images]);
        splitMs = await run(parts);
      } else {
        splitMs = await run(parts);
        wholeMs = await run([images]);
      }
      if (r >= 2) diffs.push(splitMs - wholeMs);
    }
  } finally {
    for (const t of tensors.values()) gpu.release(t);
    model.destroy();
  }
  return Math.max(0, median(diffs) / 2 / 1000);
}

/** Runs the ring of two with stragglers of mean `mu`, without and with stealing (Node volunteers, as the other runs). */
export async function straggleRuns(mu: number, o: RunContext): Promise<[RunSummary, RunSummary]> {
  const args = ['--straggle', String(mu)];
  const plain = await runRing(STRAGGLE_PEERS, { ...o, tag: 'straggle', volunteerArgs: args });
  const steal = await runRing(STRAGGLE_PEERS, { ...o, tag: 'straggle-steal', volunteerArgs: args, job: { stealFraction: PREDICT_STEAL_FRACTION } });
  return [plain, steal];
}

/** The simulator's step times for the two straggler runs, given the calibration of the ordinary runs. */
export function predictStraggle(cal: Calibration, profile: ModelProfile, mu: number, runs: [RunSummary, RunSummary], microBatchS: number): StraggleResult {
  const [plain, steal] = runs;
  // Injected and contention slowdowns, both per step: their means add.
  const straggler = mu + cal.stragglerMean;
  const plainMeans = meanFigures(plain);
  const speed = runSpeed({ ...asMeasured(plain), computeMeanS: plainMeans.computeMeanS }, straggler);
  const cluster = { peers: plain.peers, imagesPerSecPerPeer: speed, speedSigma: 0, stragglerMean: straggler, share: 1 / plain.peers, link: cal.link, seed: 1 };
  const w = { batch: plain.batch, profile };
  const system = { ...measuredSystem(cal), microBatchS };
  const predictedS: [number, number] = [
    simulateStep(cluster, system, w).totalS, simulateStep(cluster, { ...system, steal: { fraction: PREDICT_STEAL_FRACTION } }, w).totalS,
  ];
  const measuredS: [number, number] = [plainMeans.stepS, meanFigures(steal).stepS];
  return {
    mu, peers: plain.peers, batch: plain.batch, runs, measuredS, predictedS,
    errors: [Math.abs(predictedS[0] - measuredS[0]) / measuredS[0], Math.abs(predictedS[1] - measuredS[1]) / measuredS[1]],
    measuredSpeedup: measuredS[0] / measuredS[1], predictedSpeedup: predictedS[0] / predictedS[1], microBatchS,
  };
}
