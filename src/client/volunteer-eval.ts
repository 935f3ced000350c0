// The volunteer's share of an evaluation: its validation ids through the model, counted the way
// the coordinator sums them over peers (samples, top-1 and top-5 hits, the loss sum, and the
// confusion matrix and predictions when asked).
import { evaluate } from '../train/evaluate.ts';
import type { BatchLoader } from '../data/loader.ts';
import type { Model } from '../nn/model.ts';
import type { EvalCounts, Evaluate } from '../protocol/messages.ts';

/** The counts of evaluating `m.ids` on `model` in batches of at most `most` images (all zero when it names none). */
export async function evalCounts(model: Model, val: BatchLoader, m: Evaluate, most = 64): Promise<EvalCounts> {
  const counts: EvalCounts = { samples: 0, top1: 0, top5: 0, lossSum: 0 };
  if (m.ids.length) {
    const r = await evaluate(model, val, m.ids, Math.min(m.ids.length, 64, Math.max(1, most)), { confusion: m.confusion === true, show: m.show ?? [] });
    counts.samples = r.samples;
    counts.top1 = Math.round(r.top1 * r.samples);
    counts.top5 = Math.round(r.top5 * r.samples);
    counts.lossSum = Number.isFinite(r.loss) ? Math.max(0, r.loss * r.samples) : 0;
    if (r.confusion) counts.confusion = r.confusion;
    if (r.predictions?.length) counts.predictions = r.predictions;
  }
  return counts;
}
