// A single peer training on its own (Node headless or a browser worker): the loop the
// distributed volunteer builds on. Each step: load the step's samples (prefetched while the
// GPU works), record gradients + update, read the loss back; evaluate every `evalEvery` steps.
import type { Gpu } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { BatchLoader } from '../data/loader.ts';
import type { Model } from '../nn/model.ts';
import type { Optimizer } from '../optim/gpu-types.ts';
import { type EvalResult, evaluate } from './evaluate.ts';
import { stepSamples, stepsPerEpoch } from './sampler.ts';
import { recordGradients, recordUpdate, uploadBatch } from './step.ts';

export interface LocalTrainOptions {
  gpu: Gpu;
  model: Model<Tensor>;
  optimizer: Optimizer;
  train: BatchLoader;
  trainSamples: number;
  /** Evaluation loader and the ids to evaluate on (e.g. the first 1,000 of the test split). */
  evalLoader?: BatchLoader;
  evalIds?: readonly number[];
  globalBatch: number;
  steps: number;
  /** First step (resuming from a checkpoint). */
  startStep?: number;
  seed: number;
  evalEvery?: number;
  onStep?: (s: StepReport) => void;
  onEval?: (step: number, r: EvalResult) => void;
  /** Stops the loop after the current step when it returns true. */
  shouldStop?: () => boolean;
}

export interface StepReport { step: number; epoch: number; loss: number; imagesPerSec: number; ms: number }

export interface LocalTrainResult { steps: number; lastLoss: number; evals: { step: number; result: EvalResult }[] }

export async function trainLocal(o: LocalTrainOptions): Promise<LocalTrainResult> {
  const { gpu, model, optimizer, globalBatch } = o;
  const start = o.startStep ?? 0;
  const load = (s: number) => {
    const { epoch, ids } = stepSamples(o.seed, s, globalBatch, o.trainSamples);
    return o.train.load(ids, epoch);
  };
  const evals: { step: number; result: EvalResult }[] = [];
  const runEval = async (step: number) => {
    if (!o.evalLoader || !o.evalIds || o.evalIds.length === 0) return;
    const result = await evaluate(model, o.evalLoader, o.evalIds, globalBatch);
    evals.push({ step, result });
    o.onEval?.(step, result);
  };
  let x: Tensor | null = null;
  let lastLoss = NaN;
  let pending = start < o.steps ? load(start) : null;
  let s = start;
  for (; s < o.steps; s++) {
    const t0 = performance.now();
    const batch = await pending!;
    x = uploadBatch(model, batch, x);
    const total = recordGradients(model, x, o.seed * 1_000_003 + s);
    recordUpdate(model, optimizer, s, globalBatch);
    gpu.flush();
    // Decode the next batch on the CPU while the GPU runs this step.
    pending = s + 1 < o.steps ? load(s + 1) : null;
    lastLoss = (await gpu.readF32(total))[0]! / globalBatch;
    const ms = performance.now() - t0;
    o.onStep?.({ step: s + 1, epoch: (s + 1) / stepsPerEpoch(o.trainSamples, globalBatch), loss: lastLoss, imagesPerSec: globalBatch / (ms / 1000), ms });
    if (o.evalEvery && (s + 1) % o.evalEvery === 0) await runEval(s + 1);
    if (o.shouldStop?.()) { s++; break; }
  }
  if (pending) await pending;
  if (x) gpu.release(x);
  if (!o.evalEvery || s % o.evalEvery !== 0) await runEval(s);
  return { steps: s, lastLoss, evals };
}
