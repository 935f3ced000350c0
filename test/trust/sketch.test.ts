// Verifying contributions to a real ring all-reduce with linear sketches (src/trust/sketch.ts,
// coordinator/trust-check.ts): 4 peers sum their gradients over in-memory links with the f32,
// f16 and bf16 wires (the ring's own framing and rounding). Honest peers pass the sum check in
// every trial; a peer that sends one thing and reports the sketch of another fails it, for
// every kind of wrong gradient issue 46 names; a peer that reports what it really sent passes
// the sum check (but for a gradient 50x too large, whose own rounding trips it) and fails an
// audit against an honest recomputation (itself a float32 recomputation in another order, which
// passes); and the blatant kinds rank first by suspicion.
import { describe, expect, it } from 'vitest';
import { auditCheck, suspicion, sumCheck, Z_LIMIT, type CheckedWire } from '../../coordinator/trust-check.ts';
import { allReduceSum, memoryRing } from '../../src/comm/index.ts';
import { weightChecksum } from '../../src/client/checksum.ts';
import { makeRng, type Rng } from '../../src/rng.ts';
import { addSketches, sketch, sketchSeed, type GradientSketch } from '../../src/trust/sketch.ts';

const N = 40_000;
const PEERS = 4;
const IMAGES = 32;

/** A slice's gradient sum: `images` per-image gradients around a shared mean (the batch's direction), scaled per layer. */
function sliceGradient(rng: Rng, mean: Float32Array, images: number): Float32Array {
  const g = new Float32Array(N);
  for (let j = 0; j < N; j++) g[j] = images * mean[j]! + Math.sqrt(images) * 3 * Math.abs(mean[j]!) * rng.normal();
  return g;
}

function meanGradient(rng: Rng): Float32Array {
  const m = new Float32Array(N);
  // Layers of very different scales, as a network's are.
  for (let j = 0; j < N; j++) m[j] = rng.normal() * 10 ** -(1 + Math.floor((4 * j) / N));
  return m;
}

/** The wrong gradients issue 46 names, made from the honest one (and the batch's statistics). */
const ATTACKS: Record<string, (g: Float32Array, rng: Rng, mean: Float32Array) => Float32Array> = {
  'sign flipped': (g) => g.map((x) => -x),
  'scaled 50x': (g) => g.map((x) => 50 * x),
  'zeros (skipped work)': (g) => g.map(() => 0),
  'half the slice': (_g, rng, mean) => sliceGradient(rng, mean, IMAGES / 2),
  'other images': (_g, rng, mean) => sliceGradient(rng, mean, IMAGES),
  'noise of the right size': (g, rng) => {
    const rms = Math.sqrt(g.reduce((s, x) => s + x * x, 0) / g.length);
    return g.map(() => rms * rng.normal());
  },
  'a stale step\'s': (_g, rng) => sliceGradient(rng, meanGradient(rng), IMAGES),
};

/** One step of the ring: returns each peer's input (as it was before the ring) and the sum every peer got back. */
async function ringStep(inputs: Float32Array[], wire: CheckedWire): Promise<Float32Array> {
  const ids = inputs.map((_, i) => `p${i}`);
  const { rings } = memoryRing(ids);
  const outs = inputs.map((g) => g.slice());
  await Promise.all(rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: 0, wire, messageBytes: 16 << 10 })));
  for (const r of rings) r.close();
  return outs[0]!;
}

/** A seed as a step's result gives it: from the weight checksum's function over the sum's bits. */
const seedOf = (sum: Float32Array): number => sketchSeed(weightChecksum(sum));

describe('linear sketches', () => {
  it('add up: the sketch of a sum is the sum of the sketches; the norm is exact', () => {
    const rng = makeRng(1);
    const a = Float32Array.from({ length: 5000 }, () => rng.normal());
    const b = Float32Array.from({ length: 5000 }, () => rng.normal());
    const s = sketch(a.map((x, j) => x + b[j]!), 77);
    const t = addSketches([sketch(a, 77), sketch(b, 77)]);
    for (let k = 0; k < s.sums.length; k++) expect(Math.abs(s.sums[k]! - t.sums[k]!)).toBeLessThan(1e-4);
    expect(s.squares.reduce((x, y) => x + y, 0)).toBeCloseTo(a.reduce((x, v, j) => x + (v + b[j]!) ** 2, 0), 0);
    // Another seed puts the elements elsewhere.
    expect(sketch(a, 78).sums).not.toEqual(sketch(a, 77).sums);
    expect(() => addSketches([sketch(a, 1), sketch(a, 2)])).toThrow(/different seeds/);
    expect(() => sketchSeed('xyz')).toThrow(/16 lowercase hex digits/);
  });
});

describe('the sum check on a real ring', () => {
  for (const wire of ['f32', 'f16', 'bf16'] as const) {
    it(`${wire}: honest peers pass in every trial; a peer that sends one gradient and reports another fails, whatever it sent`, async () => {
      let worstHonest = 0;
      for (let trial = 0; trial < 6; trial++) {
        const rng = makeRng(100 + trial);
        const mean = meanGradient(rng);
        const inputs = Array.from({ length: PEERS }, () => sliceGradient(rng, mean, IMAGES));
        const sum = await ringStep(inputs, wire);
        const seed = seedOf(sum);
        const verdict = sumCheck(inputs.map((g) => ({ sketch: sketch(g, seed), images: IMAGES })), sketch(sum, seed), wire, PEERS);
        worstHonest = Math.max(worstHonest, verdict.z);
        expect(verdict.ok, `honest trial ${trial}: z ${verdict.z}`).toBe(true);
      }
      console.log(`${wire}: honest sum checks, worst bucket ${worstHonest.toFixed(2)} sigma (limit ${Z_LIMIT})`);
      for (const [kind, attack] of Object.entries(ATTACKS)) {
        const rng = makeRng(7);
        const mean = meanGradient(rng);
        const honest = Array.from({ length: PEERS }, () => sliceGradient(rng, mean, IMAGES));
        const sent = honest.map((g, i) => (i === 2 ? attack(g, rng, mean) : g));
        const sum = await ringStep(sent, wire);
        const seed = seedOf(sum);
        // Peer 2 reports the sketch of the honest gradient it did not send.
        const verdict = sumCheck(honest.map((g) => ({ sketch: sketch(g, seed), images: IMAGES })), sketch(sum, seed), wire, PEERS);
        expect(verdict.ok, `${wire}, ${kind}: z ${verdict.z}`).toBe(false);
      }
    });
  }
});

describe('audits and suspicion', () => {
  it('a peer that reports what it sent passes the sum check and fails the audit; an honest recomputation passes', async () => {
    const caught: Record<string, number> = {};
    for (const [kind, attack] of Object.entries(ATTACKS)) {
      const rng = makeRng(11);
      const mean = meanGradient(rng);
      const honest = Array.from({ length: PEERS }, () => sliceGradient(rng, mean, IMAGES));
      const sent = honest.map((g, i) => (i === 2 ? attack(g, rng, mean) : g));
      const sum = await ringStep(sent, 'bf16');
      const seed = seedOf(sum);
      const reported = sent.map((g) => ({ sketch: sketch(g, seed), images: IMAGES }));
      // A gradient far larger than the others' rounds off more than the tolerance counts for it (each
      // member's squares are capped at SQUARES_CAP x the median's): the step's sum check fails, naming no one.
      const sumOk = sumCheck(reported, sketch(sum, seed), 'bf16', PEERS).ok;
      expect(sumOk, kind).toBe(kind !== 'scaled 50x');
      // The auditor computes the same slice on the same weights: the same gradient, its float32 sums in another order.
      const recompute = (g: Float32Array): GradientSketch => sketch(g.map((x) => x * (1 + 1e-6 * rng.normal())), seed);
      const audit = auditCheck(reported[2]!.sketch, recompute(honest[2]!));
      expect(audit.ok, `${kind}: z ${audit.z}`).toBe(false);
      expect(auditCheck(reported[1]!.sketch, recompute(honest[1]!)).ok, `the honest peer next to ${kind}`).toBe(true);
      caught[kind] = suspicion(reported)[0]!.index;
    }
    // The blatant kinds stand out before any audit: the suspect audited first is the cheater.
    for (const kind of ['sign flipped', 'scaled 50x', 'zeros (skipped work)', 'noise of the right size']) expect(caught[kind], kind).toBe(2);
  });
});
