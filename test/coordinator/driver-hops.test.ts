// The driver with hop checks (coordinator/hop-check.ts, audits.ts), played with the driver harness:
// peers answer with real sketches of real ring all-reduces over memory links (test/comm/hop-helpers.ts)
// in the ring each assignment names. A liar in a two-level generation (whose hops are not checked)
// makes the step's sum not add up: the same step runs again in one flat ring, whose hop checks
// part it from each successor it disagreed with and name it at the third; the others go on.
import { describe, expect, it } from 'vitest';
import { sketch, sketchSeed } from '../../src/trust/sketch.ts';
import type { SketchReport, StepAssignment } from '../../src/protocol/messages.ts';
import { disguiseHops } from '../../src/trust/adversary.ts';
import { hopReport } from '../../src/trust/hop-sketch.ts';
import { driverHarness, imagesOf } from './driver-harness.ts';
import { reduceWithHops } from '../comm/hop-helpers.ts';

const G = 64;
const grad = (id: string, step: number): Float32Array => Float32Array.from({ length: G }, (_, j) => Math.cos(0.3 + 0.9 * j + 1.7 * step + id.charCodeAt(0)));
const report = (g: Float32Array, seed: number): SketchReport => {
  const s = sketch(g, seed);
  return { sums: [...s.sums], squares: [...s.squares] };
};
const checksumOf = (step: number): string => (0x2000 + step).toString(16).padStart(16, '0');

describe('hop checks in the driver', () => {
  it('a liar in a two-level generation: the step runs again in one flat ring, the liar is named there and evicted, the others commit', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const h = driverHarness({ twoLevelFrom: 4, verify: 1, stealFraction: 0, steps: 3 }, { audit: { draw: () => 0, directed: false } });
    /** Every member of `as` answers: the liar `c` sends its gradient sign-flipped and reports the honest one (and honest-looking hops). */
    const answer = async (as: readonly StepAssignment[]) => {
      const step = as[0]!.step;
      const seed = sketchSeed(checksumOf(step));
      const ring = as[0]!.ring;
      const kept = ring.map((id) => grad(id, step));
      const put = ring.map((id, i) => (id === 'c' ? kept[i]!.map((x) => -x) : kept[i]!));
      const reduced = await reduceWithHops(put);
      const flat = as[0]!.topology === undefined;
      ring.forEach((id, i) => { if (id === 'c') disguiseHops(reduced.hops[i]!, kept[i]!, 'f32'); });
      for (const a of as) {
        const id = a.ring[a.rank]!;
        const r = reduced.hops[a.rank]!;
        const audit = a.verify?.audit;
        h.d.message(id, {
          type: 'step-result', peerId: id, generation: a.generation, step, loss: 1, checksum: checksumOf(step),
          timings: { computeMs: 10, commMs: 1, waitMs: 0 }, images: imagesOf(a),
          sketch: report(kept[a.rank]!, seed), total: report(reduced.outs[a.rank]!, seed),
          ...(audit ? { audit: { peer: audit.peer, ...report(grad(audit.peer, step), audit.seed ?? seed) } } : {}),
          ...(flat ? { hops: hopReport(r, seed) } : {}),
        });
      }
    };
    let as = h.startRing(ids);
    expect(as[0]!.topology, 'the first generation is two-level').toBeDefined();
    await answer(as);
    expect(h.logs.some((l) => /do not add up .*runs again in one flat ring/.test(l)), h.logs.join('\n')).toBe(true);
    const next = (ring: readonly string[]) => ring.filter((id) => h.has(id, 'step-assignment')).map((id) => h.take(id, 'step-assignment'));
    for (let attempt = 1; attempt <= 3; attempt++) {
      as = next(ids);
      expect(as.map((a) => [a.step, a.topology]), `attempt ${attempt}: ${h.logs.slice(-3).join("\n")}`).toEqual(ids.map(() => [0, undefined]));
      await answer(as.sort((x, y) => x.rank - y.rank));
    }
    expect(h.logs.some((l) => /verification: .*disagree with those of 3 different neighbours/.test(l)), h.logs.join('\n---\n')).toBe(true);
    expect(h.has('c', 'step-assignment')).toBe(false);
    expect(h.records.filter((r) => r.type === 'step')).toEqual([]);
    // Without it the four commit the job's 3 steps, each once (the ring is two-level again: a new membership is planned afresh).
    const rest = ids.filter((id) => id !== 'c');
    for (let k = 0; k < 3; k++) await answer(next(rest).sort((x, y) => x.rank - y.rank));
    expect(h.records.flatMap((r) => (r.type === 'step' ? [[r.step, r.ring]] : []))).toEqual([[1, 4], [2, 4], [3, 4]]);
    h.d.stop();
  });
});
