// A verifying job undoes a convicted peer's unaudited work (coordinator/undo.ts): the driver on
// its own, peers played by the test with real sketches (src/trust/sketch.ts) of gradients it
// makes up, and the audits' draws fixed so that the cheater goes unaudited exactly when the test
// says. x is honest and audited in steps 1-4, cheats unaudited in steps 5 and 6 (sign-flipped,
// reporting what it sends), and is caught in step 7: the ring goes back to the checkpoint of
// step 4, the newest from before its first unaudited step, and trains on from there without it.
import { describe, expect, it } from 'vitest';
import { DRAW_RESOLUTION } from '../../coordinator/audits.ts';
import { afterUndo, noteUnaudited, undoLine, undoPoint } from '../../coordinator/undo.ts';
import { sketch, sketchSeed, type GradientSketch } from '../../src/trust/sketch.ts';
import type { SketchReport, StepAssignment } from '../../src/protocol/messages.ts';
import { driverHarness, imagesOf } from './driver-harness.ts';
import { reduceWithHops } from '../comm/hop-helpers.ts';
import { hopReport } from '../../src/trust/hop-sketch.ts';

describe('undo (pure)', () => {
  it('goes back to the newest kept checkpoint at or before the first unaudited step, the seed when none is kept', () => {
    expect(undoPoint([undefined], 9, [4, 8])).toBeNull();
    expect(undoPoint([9], 9, [4, 8])).toBeNull(); // nothing unaudited of it was committed
    expect(undoPoint([5, 7], 9, [4, 8])).toEqual({ first: 5, to: 4, undone: 5 });
    expect(undoPoint([4], 9, [4, 8])).toEqual({ first: 4, to: 4, undone: 5 });
    expect(undoPoint([3], 9, [4, 8])).toEqual({ first: 3, to: 0, undone: 9 });
    expect(undoLine(['x'], { first: 3, to: 0 }, 9)).toMatch(/from step 4 on; the ring goes back to the seed .* trains steps 1..9 again without them/);
  });

  it('marks the members no agreeing audit covered, once; a survivor keeps only a mark from before the undo', () => {
    const marks = new Map<string, number>([['b', 1]]);
    const set = noteUnaudited([{ id: 'a', images: 4 }, { id: 'b', images: 4 }, { id: 'c', images: 4 }, { id: 'd', images: 0 }], new Set(['c']), 3,
      (id) => marks.get(id), (id, s) => marks.set(id, s));
    expect(set).toEqual(['a']);
    expect([...marks.entries()].sort()).toEqual([['a', 3], ['b', 1]]);
    expect(afterUndo(1, 2)).toBe(1);
    expect(afterUndo(3, 2)).toBeUndefined();
    expect(afterUndo(undefined, 2)).toBeUndefined();
  });
});

const G = 48;
const grad = (id: string, step: number): Float32Array => Float32Array.from({ length: G }, (_, j) => Math.sin(1 + 0.7 * j + 1.3 * step + id.charCodeAt(0)));
/** What each peer sends: x flips its gradient in steps 5 and 6 (indexes 4 and 5) and after. */
const sent = (id: string, step: number): Float32Array => (id === 'x' && step >= 4 ? grad(id, step).map((v) => -v) : grad(id, step));
const report = (s: GradientSketch): SketchReport => ({ sums: [...s.sums], squares: [...s.squares] });
const checksumOf = (step: number): string => (0x1000 + step).toString(16).padStart(16, '0');

describe('a convicted peer\'s unaudited steps are undone', () => {
  it('x cheats unaudited in steps 5-6, is caught in step 7: back to the checkpoint of step 4, trained on by the others', async () => {
    // The audits' draws: a probability draw per member in ring order (audited when below half), then the auditor (the first free).
    let ringIds = ['a', 'b', 'c', 'x'];
    let cursor = 0;
    let auditX = true;
    const draw = (n: number): number => (n === DRAW_RESOLUTION ? ((auditX && ringIds[cursor++] === 'x') ? 0 : DRAW_RESOLUTION - 1) : 0);
    const h = driverHarness({ minPeers: 4, verify: 0.5, stealFraction: 0, checkpointEvery: 2, keepCheckpoints: 10, steps: 12 }, {
      audit: { draw, directed: false },
    });
    const script = (x: boolean) => { auditX = x; cursor = 0; };
    // Each step's collective runs for real over memory links, so the members' hop records (a flat ring's) are what a ring's would be.
    const answer = async (as: readonly StepAssignment[]) => {
      const step = as[0]!.step;
      const seed = sketchSeed(checksumOf(step));
      const ring = as[0]!.ring;
      const reduced = await reduceWithHops(ring.map((id) => sent(id, step)));
      const total = report(sketch(reduced.outs[0]!, seed));
      for (const a of as) {
        const id = a.ring[a.rank]!;
        const r = reduced.hops[a.rank]!;
        if (a.uploadCheckpoint) h.d.checkpointStored(id, a.step);
        const audit = a.verify?.audit;
        h.d.message(id, {
          type: 'step-result', peerId: id, generation: a.generation, step: a.step, loss: 1, checksum: checksumOf(step),
          timings: { computeMs: 10, commMs: 1, waitMs: 0 }, images: imagesOf(a), sketch: report(sketch(sent(id, step), seed)), total,
          ...(audit ? { audit: { peer: audit.peer, ...report(sketch(grad(audit.peer, step), audit.seed ?? seed)) } } : {}),
          hops: hopReport(r, seed),
        });
      }
    };
    const next = (ids: readonly string[]) => ids.filter((id) => h.has(id, 'step-assignment')).map((id) => h.take(id, 'step-assignment'));

    for (const id of ['a', 'b', 'c', 'x']) h.d.peerConnected(id, id);
    for (const id of ['a', 'b', 'c', 'x']) h.ready(id, h.take(id, 'load-state').step);
    let as = next(ringIds);
    expect(as[0]!.ring).toEqual(ringIds);
    // Steps 1-4 audit x, 5-6 audit nobody, 7 audits x.
    for (const [step, auditNext] of [[0, true], [1, true], [2, true], [3, false], [4, false], [5, true]] as const) {
      expect(as.map((a) => a.step)).toEqual([step, step, step, step]);
      script(auditNext);
      await answer(as);
      as = next(ringIds);
    }
    // Step 7 (index 6): x's audit disagrees, a dispute (nobody accused), the step again with a second auditor.
    expect(as.map((a) => a.step)).toEqual([6, 6, 6, 6]);
    expect(as.some((a) => a.verify?.audit?.peer === 'x')).toBe(true);
    script(false);
    await answer(as);
    expect(h.logs.some((l) => /recomputation of x's slice disagrees/.test(l))).toBe(true);
    as = next(ringIds);
    expect(as.map((a) => a.step)).toEqual([6, 6, 6, 6]);
    await answer(as);
    // Convicted: evicted, its unaudited steps 5-6 undone: the others reload the checkpoint of step 4.
    expect(h.logs.some((l) => /verification: x contributed unaudited work from step 5 on; the ring goes back to the checkpoint of step 4/.test(l)))
      .toBe(true);
    expect(h.discarded).toEqual([4]);
    expect(h.has('x', 'step-assignment')).toBe(false);
    const survivors = ['a', 'b', 'c'];
    for (const id of survivors) expect(h.take(id, 'load-state')).toMatchObject({ source: 'checkpoint', step: 4 });
    for (const id of survivors) h.ready(id, 4);
    as = next(survivors);
    expect(as.map((a) => [a.step, a.ring.length])).toEqual([[4, 3], [4, 3], [4, 3]]);
    const undoAbort = h.records.filter((r) => r.type === 'abort').at(-1);
    expect(undoAbort).toMatchObject({ step: 7, reason: 'undone to step 4: x convicted' });
    const tally = h.records.filter((r) => r.type === 'verification').at(-1);
    expect(tally).toMatchObject({ caught: 1, convicted: ['x'] });
    // The others train on from step 5 again; every step after 4 is committed once more, by three.
    for (let step = 4; step < 12; step++) {
      expect(as.map((a) => a.step)).toEqual([step, step, step]);
      await answer(as);
      as = next(survivors);
    }
    const steps = h.records.flatMap((r) => (r.type === 'step' ? [[r.step, r.ring]] : []));
    expect(steps).toEqual([[1, 4], [2, 4], [3, 4], [4, 4], [5, 4], [6, 4], ...Array.from({ length: 8 }, (_, i) => [i + 5, 3])]);
    h.d.stop();
  });
});
