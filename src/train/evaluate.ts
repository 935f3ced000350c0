// Evaluation: top-1 / top-5 and mean loss over a list of sample ids, in inference mode (BN
// running statistics, no dropout). Counts accumulate on the engine; one readback per call.
import type { TensorLike } from '../backend/engine.ts';
import type { BatchLoader } from '../data/loader.ts';
import type { Model } from '../nn/model.ts';
import { uploadBatch } from './step.ts';

export interface EvalResult { samples: number; top1: number; top5: number; loss: number }

export async function evaluate<T extends TensorLike>(model: Model<T>, loader: BatchLoader, ids: readonly number[], batch: number): Promise<EvalResult> {
  const e = model.engine;
  let x: T | null = null;
  let lossSum = 0;
  let hits = [0, 0];
  let pending = loader.load(ids.slice(0, batch), 0);
  for (let start = 0; start < ids.length; start += batch) {
    const b = await pending;
    const next = start + batch;
    if (next < ids.length) pending = loader.load(ids.slice(next, next + batch), 0);
    x = uploadBatch(model, b, x);
    model.forward(x, { train: false });
    const total = model.loss(1);
    const counts = model.countCorrect(Math.min(5, model.spec.classes), false);
    lossSum += (await e.readF32(total))[0]!;
    const c = await e.read(counts);
    hits = [hits[0]! + c[0]!, hits[1]! + c[1]!];
  }
  if (x) e.release(x);
  const n = ids.length;
  return { samples: n, top1: hits[0]! / n, top5: hits[1]! / n, loss: lossSum / n };
}
