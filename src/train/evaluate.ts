// Evaluation: top-1 / top-5 and mean loss over a list of sample ids, in inference mode (BN
// running statistics, no dropout). Counts accumulate on the GPU; one readback per call.
import type { Gpu } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { BatchLoader } from '../data/loader.ts';
import type { Model } from '../nn/model.ts';
import { uploadBatch } from './step.ts';

export interface EvalResult { samples: number; top1: number; top5: number; loss: number }

export async function evaluate(gpu: Gpu, model: Model, loader: BatchLoader, ids: readonly number[], batch: number): Promise<EvalResult> {
  let x: Tensor | null = null;
  let lossSum = 0;
  let hits = [0, 0];
  let pending = loader.load(ids.slice(0, batch), 0);
  for (let start = 0; start < ids.length; start += batch) {
    const b = await pending;
    const next = start + batch;
    if (next < ids.length) pending = loader.load(ids.slice(next, next + batch), 0);
    x = uploadBatch(gpu, model, b, x);
    model.forward(x, { train: false });
    const total = model.loss(1);
    const counts = model.countCorrect(Math.min(5, model.spec.classes), false);
    lossSum += (await gpu.readF32(total))[0]!;
    const c = await gpu.read(counts);
    hits = [hits[0]! + c[0]!, hits[1]! + c[1]!];
  }
  if (x) gpu.release(x);
  const n = ids.length;
  return { samples: n, top1: hits[0]! / n, top5: hits[1]! / n, loss: lossSum / n };
}
