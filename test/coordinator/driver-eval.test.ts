// Evaluations across the ring: each member gets its share of the test ids, the ids whose
// predictions the dashboard shows and a request for the confusion matrix; the coordinator sums
// the answers, drops what it did not ask for, and covers the whole test split at the job's end.
import { describe, expect, it } from 'vitest';
import type { EvalCounts, Evaluate, LiveEvent } from '../../src/protocol/messages.ts';
import { driverHarness } from './driver-harness.ts';

const K = 3;
/** What a peer that answers every id with class (id mod K), true label (id mod 2), would report. */
function answer(e: Evaluate, wrongShow?: number): EvalCounts {
  const confusion = new Array<number>(K * K).fill(0);
  let top1 = 0;
  for (const id of e.ids) {
    const label = id % 2, predicted = id % K;
    confusion[label * K + predicted]! += 1;
    if (label === predicted) top1++;
  }
  const predictions = [...(e.show ?? []), ...(wrongShow === undefined ? [] : [wrongShow])]
    .map((id) => ({ id, label: id % 2, predicted: id % K, confidence: 0.5 }));
  return {
    samples: e.ids.length, top1, top5: e.ids.length, lossSum: e.ids.length, ...(e.confusion ? { confusion } : {}),
    ...(predictions.length ? { predictions } : {}),
  };
}

const evals = (events: LiveEvent[]) => events.filter((e): e is Extract<LiveEvent, { type: 'eval' }> => e.type === 'eval');

describe('evaluations with what they saw', () => {
  const evalIds = [0, 1, 2, 3, 4, 5];
  const finalEvalIds = Array.from({ length: 12 }, (_, i) => i);

  it('splits the ids and the shown ones over the ring, sums the confusion matrix, and ends on the whole test split', () => {
    const h = driverHarness({ steps: 2, evalEvery: 1 }, { evalIds, finalEvalIds, showIds: [9, 2], classes: K });
    let as = h.startRing(['a', 'b']);
    as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
    const first = [h.take('a', 'evaluate'), h.take('b', 'evaluate')];
    expect(first.map((e) => e.step)).toEqual([1, 1]);
    expect([...first[0]!.ids, ...first[1]!.ids].sort((x, y) => x - y)).toEqual(evalIds);
    // Only the member holding id 2 is asked to show it; 9 is not evaluated at this step.
    expect(first.flatMap((e) => e.show ?? [])).toEqual([2]);
    expect(first.find((e) => e.show)!.ids).toContain(2);
    expect(first.every((e) => e.confusion === true)).toBe(true);
    first.forEach((e, i) => h.d.message(['a', 'b'][i]!, { type: 'eval-result', peerId: ['a', 'b'][i]!, step: 1, counts: answer(e) }));
    let ev = evals(h.events).at(-1)!;
    expect(ev.samples).toBe(6);
    expect(ev.final).toBeUndefined();
    // Ids 0..5: labels 0,1,0,1,0,1 predicted 0,1,2,0,1,2.
    expect(ev.confusion).toEqual([1, 1, 1, 1, 1, 1, 0, 0, 0]);
    expect(ev.top1).toBeCloseTo(2 / 6, 12);
    expect(ev.predictions).toEqual([{ id: 2, label: 0, predicted: 2, confidence: 0.5 }]);

    as = [h.take('a', 'step-assignment'), h.take('b', 'step-assignment')];
    as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
    const last = [h.take('a', 'evaluate'), h.take('b', 'evaluate')];
    expect([...last[0]!.ids, ...last[1]!.ids].sort((x, y) => x - y)).toEqual(finalEvalIds);
    expect(last.flatMap((e) => e.show ?? []).sort((x, y) => x - y)).toEqual([2, 9]);
    // Member a also reports an id it was not asked to show: dropped, and said so.
    h.d.message('a', { type: 'eval-result', peerId: 'a', step: 2, counts: answer(last[0]!, 11) });
    h.d.message('b', { type: 'eval-result', peerId: 'b', step: 2, counts: answer(last[1]!) });
    ev = evals(h.events).at(-1)!;
    expect(ev).toMatchObject({ step: 2, samples: 12, final: true });
    expect(ev.confusion!.reduce((a, v) => a + v, 0)).toBe(12);
    // In the order the plan gave them (9 before 2), 11 left out.
    expect(ev.predictions!.map((p) => p.id)).toEqual([9, 2]);
    expect(h.logs.some((l) => /evaluation of step 2: a prediction for id 11/.test(l))).toBe(true);
    // The metrics hold the same.
    expect(h.records.filter((r) => r.type === 'eval').at(-1)).toMatchObject({ step: 2, final: true, samples: 12 });
    h.d.stop();
  });

  it('a member whose confusion matrix has the wrong size: the evaluation keeps its counts but no matrix', () => {
    const h = driverHarness({ steps: 3, evalEvery: 1 }, { evalIds, classes: K });
    const as = h.startRing(['a']);
    h.result('a', as[0]!);
    const e = h.take('a', 'evaluate');
    h.d.message('a', { type: 'eval-result', peerId: 'a', step: 1, counts: { ...answer(e), confusion: [6, 0, 0, 0] } });
    const ev = evals(h.events).at(-1)!;
    expect(ev.samples).toBe(6);
    expect(ev.confusion).toBeUndefined();
    expect(h.logs.some((l) => /confusion matrix of 4 counts, not 9/.test(l))).toBe(true);
    h.d.stop();
  });

  it('more classes than a matrix is asked for: no confusion requested; without final ids the last evaluation uses the usual ones', () => {
    const h = driverHarness({ steps: 1, evalEvery: 1 }, { evalIds, classes: 1000 });
    const as = h.startRing(['a']);
    h.result('a', as[0]!);
    const e = h.take('a', 'evaluate');
    expect(e.confusion).toBeUndefined();
    expect(e.ids).toEqual(evalIds);
    h.d.stop();
  });
});
