// Evaluation: top-1 / top-5 and mean loss over a list of sample ids, in inference mode (BN
// running statistics, no dropout). Counts accumulate on the engine; one readback per call.
import type { TensorLike } from '../backend/engine.ts';
import type { BatchLoader } from '../data/loader.ts';
import type { Model } from '../nn/model.ts';
import type { EvalPrediction } from '../protocol/messages.ts';
import { uploadBatch } from './step.ts';

export interface EvalResult { samples: number; top1: number; top5: number; loss: number; confusion?: number[]; predictions?: EvalPrediction[] }

/** What an evaluation reports beyond its counts: a confusion matrix, the answers for some ids. */
export interface EvalDetail { confusion: boolean; show: readonly number[] }

export async function evaluate<T extends TensorLike>(
  model: Model<T>, loader: BatchLoader, ids: readonly number[], batch: number, detail?: EvalDetail,
): Promise<EvalResult> {
  const e = model.engine;
  const k = model.spec.classes;
  const confusion = detail?.confusion ? new Array<number>(k * k).fill(0) : null;
  const show = new Set(detail?.show ?? []);
  const predictions: EvalPrediction[] = [];
  const perImage = confusion !== null || ids.some((id) => show.has(id));
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
    if (perImage) answers(await e.readF32(model.logits), b.labels, ids.slice(start, start + batch), k, confusion, show, predictions);
  }
  if (x) e.release(x);
  const n = ids.length;
  return { samples: n, top1: hits[0]! / n, top5: hits[1]! / n, loss: lossSum / n, ...(confusion ? { confusion } : {}), ...(show.size ? { predictions } : {}) };
}

/**
 * Per image of a batch: the arg-max class (ties to the lower index) into the confusion
 * counts, and for a shown id its softmax probability, computed in float64.
 */
export function answers(
  logits: Float32Array, labels: Int32Array, ids: readonly number[], k: number, confusion: number[] | null, show: ReadonlySet<number>,
  out: EvalPrediction[],
): void {
  for (let i = 0; i < ids.length; i++) {
    let best = 0;
    for (let j = 1; j < k; j++) if (logits[i * k + j]! > logits[i * k + best]!) best = j;
    const label = labels[i]!;
    if (confusion) confusion[label * k + best]! += 1;
    if (!show.has(ids[i]!)) continue;
    const top = logits[i * k + best]!;
    let z = 0;
    for (let j = 0; j < k; j++) z += Math.exp(logits[i * k + j]! - top);
    out.push({ id: ids[i]!, label, predicted: best, confidence: 1 / z });
  }
}
