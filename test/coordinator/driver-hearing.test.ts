// Hearings in the driver (protocol 15; driver-machine.ts hear/heard, audits.ts hearingVerdict),
// played with the driver harness: peers answer with real sketches of real ring all-reduces over
// memory links. A member that relays the all-gather's sums sign-flipped (and disguises its
// records) makes the members after it hold other weights: the driver sends every member a fresh
// seed instead of evicting the dissenters, the answers' hop checks part the tamperer from each
// successor it disagreed with and name it; no honest member is ever evicted, and the others
// commit every step once. A member that does not answer a hearing is evicted when it times out.
import { describe, expect, it } from 'vitest';
import type { RelayTamper } from '../../src/comm/hop-record.ts';
import type { HopSeed, StepAssignment } from '../../src/protocol/messages.ts';
import { disguiseRelays } from '../../src/trust/adversary.ts';
import { hopReport, relayHopReport, sketchReport } from '../../src/trust/hop-sketch.ts';
import { sketch, sketchSeed } from '../../src/trust/sketch.ts';
import { reduceWithHops } from '../comm/hop-helpers.ts';
import { driverHarness, imagesOf } from './driver-harness.ts';

const G = 96;
const grad = (id: string, step: number): Float32Array => Float32Array.from({ length: G }, (_, j) => Math.cos(0.3 + 0.9 * j + 1.7 * step + id.charCodeAt(0)));
const flip: RelayTamper = (p) => {
  for (let i = 0; i < p.length; i++) p[i] = -p[i]!;
};

/** A 16-hex-digit checksum of a member's sum (FNV-1a over its bytes): equal sums, equal checksums. */
function checksumOf(sum: Float32Array): string {
  let a = 0x811c9dc5;
  let b = 0x01000193;
  for (const byte of new Uint8Array(sum.buffer, sum.byteOffset, sum.byteLength)) {
    a = Math.imul(a ^ byte, 0x01000193) >>> 0;
    b = Math.imul(b ^ byte ^ 0x5a, 0x01000193) >>> 0;
  }
  return a.toString(16).padStart(8, '0') + b.toString(16).padStart(8, '0');
}

type Harness = ReturnType<typeof driverHarness>;

/** Every member of `as` (ring order) reports its step; `tamperer` relays sign-flipped. Resolves to what each kept, for a hearing. */
async function answerStep(h: Harness, as: readonly StepAssignment[], tamperer: string | null) {
  const ring = as[0]!.ring;
  const step = as[0]!.step;
  const kept = ring.map((id) => grad(id, step));
  const reduced = await reduceWithHops(kept, 'f32', 1, undefined, ring.map((id) => (id === tamperer ? flip : null)));
  ring.forEach((id, i) => { if (id === tamperer) disguiseRelays(reduced.hops[i]!); });
  for (const a of as) {
    const id = a.ring[a.rank]!;
    const checksum = checksumOf(reduced.outs[a.rank]!);
    const seed = sketchSeed(checksum);
    const audit = a.verify?.audit;
    h.d.message(id, {
      type: 'step-result', peerId: id, generation: a.generation, step, loss: 1, checksum, timings: { computeMs: 10, commMs: 1, waitMs: 0 },
      images: imagesOf(a), sketch: sketchReport(sketch(kept[a.rank]!, seed)), total: sketchReport(sketch(reduced.outs[a.rank]!, seed)),
      ...(audit ? { audit: { peer: audit.peer, ...sketchReport(sketch(grad(audit.peer, step), audit.seed ?? seed)) } } : {}),
      hops: hopReport(reduced.hops[a.rank]!, seed),
    });
  }
  return { ring, kept, hops: reduced.hops };
}

/** The members of a hearing answer its seed. */
function answerHearing(h: Harness, s: Awaited<ReturnType<typeof answerStep>>, silent: ReadonlySet<string> = new Set()): HopSeed[] {
  return s.ring.map((id, i) => {
    const m = h.take(id, 'hop-seed');
    if (!silent.has(id)) {
      h.d.message(id, {
        type: 'hop-sketches', peerId: id, generation: m.generation, step: m.step, sketch: sketchReport(sketch(s.kept[i]!, m.seed)),
        hops: relayHopReport(s.hops[i]!, m.seed),
      });
    }
    return m;
  });
}

const next = (h: Harness, ids: readonly string[]) =>
  ids.filter((id) => h.has(id, 'step-assignment')).map((id) => h.take(id, 'step-assignment')).sort((x, y) => x.rank - y.rank);

describe('hearings in the driver', () => {
  it('a relay tamperer: the dissenters are heard, not evicted; the tamperer is named at its third successor; the others commit', async () => {
    const ids = ['a', 'b', 'c', 'd'];
    const h = driverHarness({ verify: 1, stealFraction: 0, steps: 3 }, { audit: { draw: () => 0, directed: false } });
    let as = h.startRing(ids);
    const seeds = new Set<number>();
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect(as.map((a) => a.step), `attempt ${attempt}`).toEqual([0, 0, 0, 0]);
      const s = await answerStep(h, as, 'c');
      // Every member, those that hold the ring's weights and those that do not, gets the same fresh seed.
      const asked = answerHearing(h, s);
      expect(new Set(asked.map((m) => m.seed)).size).toBe(1);
      seeds.add(asked[0]!.seed);
      expect(asked.every((m) => m.step === 0 && m.generation === as[0]!.generation)).toBe(true);
      if (attempt < 3) as = next(h, ids);
    }
    expect(seeds.size, 'a fresh seed each hearing').toBe(3);
    const verdicts = h.logs.filter((l) => l.startsWith('verification:'));
    expect(verdicts.filter((l) => /hold other weights than the rest/.test(l)).length, verdicts.join('\n')).toBe(3);
    expect(verdicts.filter((l) => /runs again with those members apart/.test(l)).length, verdicts.join('\n')).toBe(2);
    expect(verdicts.some((l) => /disagree with those of 3 different neighbours \(step 1: c with/.test(l)), verdicts.join('\n')).toBe(true);
    // Only c was evicted; nothing was committed while it was in the ring.
    expect(h.sent.filter((s) => s.m.type === 'evicted').map((s) => s.to)).toEqual(['c']);
    expect(h.records.filter((r) => r.type === 'step')).toEqual([]);
    const rest = ids.filter((id) => id !== 'c');
    for (let k = 0; k < 3; k++) await answerStep(h, next(h, rest), null);
    expect(h.records.flatMap((r) => (r.type === 'step' ? [[r.step, r.ring]] : []))).toEqual([[1, 3], [2, 3], [3, 3]]);
    expect(h.sent.some((s) => s.m.type === 'hop-seed')).toBe(false);
    h.d.stop();
  });

  it('a member that does not answer a hearing is evicted when the hearing times out; a job that does not verify evicts dissenters at once', async () => {
    const ids = ['a', 'b', 'c', 'd'];
    const h = driverHarness({ verify: 1, stealFraction: 0, steps: 3 }, { audit: { draw: () => 0, directed: false }, timeouts: { hearingMs: 50 } });
    const s = await answerStep(h, h.startRing(ids), 'b');
    answerHearing(h, s, new Set(['d']));
    const deadline = Date.now() + 5_000;
    while (!h.sent.some((m) => m.m.type === 'evicted') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const evicted = h.sent.filter((m) => m.m.type === 'evicted');
    expect(evicted.map((m) => m.to)).toEqual(['d']);
    expect(JSON.stringify(evicted[0]!.m)).toMatch(/no hop records for the hearing of step 1 within 50 ms/);
    h.d.stop();

    const plain = driverHarness({ stealFraction: 0, steps: 3 });
    const as = plain.startRing(ids);
    as.forEach((a, i) => plain.result(a.ring[a.rank]!, a, i === 1 ? 'bad0' : 'c0ffee'));
    expect(plain.sent.some((m) => m.m.type === 'hop-seed')).toBe(false);
    expect(plain.sent.filter((m) => m.m.type === 'evicted').map((m) => m.to)).toEqual([as[1]!.ring[1]]);
    plain.d.stop();
  });
});

describe('a dissent in a two-level generation', () => {
  it('runs the step again in one flat ring (whose hops a hearing can check) instead of evicting anyone', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const h = driverHarness({ twoLevelFrom: 4, verify: 1, stealFraction: 0, steps: 3 }, { audit: { draw: () => 0, directed: false } });
    const as = h.startRing(ids);
    expect(as[0]!.topology, 'the first generation is two-level').toBeDefined();
    // Its members' sums differ (a relay changed in the group all-gather, say): answered here by a flat ring's records.
    await answerStep(h, as, 'c');
    expect(h.sent.some((m) => m.m.type === 'evicted' || m.m.type === 'hop-seed')).toBe(false);
    expect(h.logs.some((l) => /two-level generation hold other weights .* runs again in one flat ring/.test(l)), h.logs.join('\n')).toBe(true);
    const flat = next(h, ids);
    expect(flat.map((a) => [a.step, a.topology])).toEqual(ids.map(() => [0, undefined]));
    // There a dissent is heard.
    answerHearing(h, await answerStep(h, flat, 'c'));
    expect(h.logs.some((l) => /runs again with those members apart/.test(l)), h.logs.join('\n')).toBe(true);
    expect(h.sent.some((m) => m.m.type === 'evicted')).toBe(false);
    h.d.stop();
  });
});
