// An evaluation across the ring: which test ids each member evaluates, and the sum of their
// answers (counts, the confusion matrix, the predictions for the dashboard's grid). Pure but
// for the tally object it fills.
import { MAX_CONFUSION_CLASSES, type EvalCounts, type EvalPrediction, type EvalSummary, type Evaluate } from '../src/protocol/messages.ts';
import { splitBatch } from './job.ts';
import { sliceIds } from '../src/train/sampler.ts';

export interface EvalPlan {
  /** Test ids this evaluation covers (the whole split at the job's end). */
  ids: readonly number[];
  /** Ids whose predictions are reported one by one (a subset of `ids`). */
  show: readonly number[];
  /** Classes of the model; a confusion matrix is asked for when at most MAX_CONFUSION_CLASSES. */
  classes: number;
  final: boolean;
}

export interface EvalTally {
  readonly plan: EvalPlan;
  counts: EvalCounts;
  confusion: number[] | null;
  predictions: EvalPrediction[];
  /** A member's report that did not fit the plan (its extra parts are dropped, its counts kept). */
  problems: string[];
}

/** The `evaluate` message for each member, in ring order, by measured speed. */
export function evalMessages(step: number, plan: EvalPlan, speeds: readonly number[]): Evaluate[] {
  const slices = sliceIds(plan.ids, splitBatch(plan.ids.length, speeds));
  const show = new Set(plan.show);
  const confusion = plan.classes <= MAX_CONFUSION_CLASSES;
  return slices.map((ids) => {
    const shown = ids.filter((id) => show.has(id));
    return { type: 'evaluate', step, ids, ...(shown.length ? { show: shown } : {}), ...(confusion ? { confusion } : {}) };
  });
}

export function startTally(plan: EvalPlan): EvalTally {
  const k = plan.classes;
  return {
    plan, counts: { samples: 0, top1: 0, top5: 0, lossSum: 0 }, confusion: k <= MAX_CONFUSION_CLASSES ? new Array<number>(k * k).fill(0) : null,
    predictions: [], problems: [],
  };
}

/** Adds one member's answer to its `evaluate` message `asked`. */
export function addToTally(t: EvalTally, asked: Evaluate, c: EvalCounts): void {
  t.counts.samples += c.samples;
  t.counts.top1 += c.top1;
  t.counts.top5 += c.top5;
  t.counts.lossSum += c.lossSum;
  const k = t.plan.classes;
  if (t.confusion && c.samples > 0) {
    if (c.confusion?.length === k * k) c.confusion.forEach((v, i) => (t.confusion![i]! += v));
    else {
      t.problems.push(`a confusion matrix of ${c.confusion?.length ?? 0} counts, not ${k * k}`);
      t.confusion = null;
    }
  }
  const shown = new Set(asked.show ?? []);
  for (const p of c.predictions ?? []) {
    if (!shown.has(p.id) || p.label >= k || p.predicted >= k) {
      t.problems.push(`a prediction for id ${p.id} (label ${p.label}, class ${p.predicted}) it was not asked for`);
      continue;
    }
    shown.delete(p.id);
    t.predictions.push(p);
  }
}

/** The evaluation's summary; null when no member answered. */
export function tallySummary(t: EvalTally, step: number): EvalSummary | null {
  const c = t.counts;
  if (c.samples === 0) return null;
  const order = new Map(t.plan.show.map((id, i) => [id, i]));
  const predictions = [...t.predictions].sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  return {
    step, top1: c.top1 / c.samples, top5: c.top5 / c.samples, loss: c.lossSum / c.samples, samples: c.samples,
    ...(t.plan.final ? { final: true } : {}),
    ...(t.confusion ? { confusion: t.confusion } : {}),
    ...(predictions.length ? { predictions } : {}),
  };
}
