// The volunteer's sync step (src/client/sync-step.ts) on 3 peers in one process: wasm engines,
// a memory ring, small-cnn cut into 7 buckets. Asserted: every peer ends with the same summed
// bits, close to the float64 sum of what they kept; what each peer kept is its single-pass
// gradient plus the reused sum, i.e. the values BEFORE the all-reduce summed them in place; a
// ring that breaks mid-step is an outcome, not a throw, and the kept sum is still whole; the
// ring step numbering's bounds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketStep } from '../../src/comm/buckets.ts';
import { memoryRing } from '../../src/comm/memory-ring.ts';
import { flatStepRings } from '../../src/client/step-rings.ts';
import { checkRingStep, lastRingStep, roundRingStep, syncBuckets, syncGradients, type SyncOutcome } from '../../src/client/sync-step.ts';
import type { GradBucket } from '../../src/nn/buckets.ts';
import { Model } from '../../src/nn/model.ts';
import { smallCnn } from '../../src/nn/models.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { GradArrays } from '../../src/train/grad-arrays.ts';
import { recordGradients } from '../../src/train/step.ts';
import { WasmEngine, type WasmTensor } from '../../src/wasm/engine.ts';
import { bitwiseEqual } from '../comm/helpers.ts';

const N = 3;
const BATCH = 2;
const SEED = 7;
const spec = smallCnn([1, 28, 28], 10);

interface Peer { engine: WasmEngine; model: Model<WasmTensor>; x: WasmTensor; single: Float32Array }
const peers: Peer[] = [];
let buckets: GradBucket[] = [];

beforeAll(async () => {
  for (let i = 0; i < N; i++) {
    const engine = await WasmEngine.create({ threads: 1 });
    const model = new Model(engine, spec, { seed: 3 });
    const x = engine.upload(uniformF32(makeRng(10 + i), BATCH * 28 * 28), [BATCH, 1, 28, 28]);
    engine.write(model.labelsTensor(BATCH), Int32Array.from({ length: BATCH }, (_, j) => (j + 3 * i) % 10));
    recordGradients(model, x, SEED);
    peers.push({ engine, model, x, single: await engine.readF32(model.grads) });
  }
  buckets = syncBuckets(peers[0]!.model.layout, { bucketBytes: 64 << 10 });
});
afterAll(() => {
  for (const p of peers) {
    p.engine.release(p.x);
    p.model.destroy();
    p.engine.destroy();
  }
});

/** One sync step on every peer; peer 0 adds `reused`. */
async function step(
  settings: { stallTimeoutMs?: number }, reused: { grads: Float32Array; lossSum: number } | null, breakRing = false, pools: GradArrays[] = [],
): Promise<{ outs: SyncOutcome[]; kept: Float32Array[] }> {
  const { rings } = memoryRing(peers.map((_, i) => `p${i}`), { settings });
  const kept: Float32Array[] = [];
  try {
    const outs = await Promise.all(peers.map((p, i) => syncGradients(
      { model: p.model, x: p.x, stepSeed: SEED, labelSmoothing: 0, buckets, reused: i === 0 ? reused : null, ...(pools[i] ? { arrays: pools[i] } : {}) },
      Promise.resolve(flatStepRings(rings[i]!)),
      {
        step: 4, images: BATCH, globalBatch: N * BATCH, gradRms: [],
        keep: (sum) => { kept[i] = sum.grads; },
        // Peer 2 leaves as its first bucket's sum starts: the others are inside the collective.
        onStart: (ring) => { if (breakRing && i === 2) ring.close(); },
        throttle: async () => undefined,
      },
    )));
    return { outs, kept };
  } finally {
    for (const r of rings) r.close();
  }
}

describe('syncGradients: staged backward + bucketed all-reduce (3 peers, wasm, memory ring)', () => {
  it('cuts small-cnn into 7 buckets at 64 KiB, 1 with overlap off; ring steps bucketed, bounded', () => {
    expect(buckets.length).toBe(7);
    expect(syncBuckets(peers[0]!.model.layout, { overlap: false }).length).toBe(1);
    // 1.5 MiB < 25 MiB, its first layers' 0.37 MB all-reduced last on their own (lastBucketBytes 1 MiB).
    expect(syncBuckets(peers[0]!.model.layout, {}).map((b) => b.params.map((p) => p.name))).toEqual([
      ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'], ['conv1.weight', 'conv1.bias', 'conv2.weight', 'conv2.bias', 'conv3.weight', 'conv3.bias'],
    ]);
    expect(syncBuckets(peers[0]!.model.layout, { lastBucketBytes: 0 }).length).toBe(1);
    expect(roundRingStep(9)).toBe(bucketStep(9, 0));
    expect(() => checkRingStep({ step: lastRingStep(false) })).not.toThrow();
    expect(() => checkRingStep({ step: lastRingStep(false) + 1 })).toThrow(/give the job at most 16777216 steps/);
    expect(() => checkRingStep({ step: lastRingStep(true) + 1, topology: { groups: [['a'], ['b']], shards: 1, columns: [['a', 'b']] } })).toThrow(/two-level/);
    // The last step's last bucket still fits a frame's u32 step (two-level: 2 * ringStep + 1).
    expect(bucketStep(lastRingStep(false), 255)).toBe(2 ** 32 - 1);
    expect(2 * bucketStep(lastRingStep(true), 255) + 1).toBe(2 ** 32 - 1);
  });

  it('every peer gets the same sum; each kept its own gradient (plus the reused sum) as before the all-reduce', { timeout: 60_000 }, async () => {
    const reused = { grads: uniformF32(makeRng(99), peers[0]!.single.length).map((v) => v * 1e-3), lossSum: 1.5 };
    const { outs, kept } = await step({}, reused);
    const summed = outs.map((o) => {
      if (o.kind !== 'summed') throw new Error(`outcome ${o.kind}`);
      return o;
    });
    for (const o of summed) expect(bitwiseEqual(o.grads, summed[0]!.grads)).toBe(true);
    const own0 = peers[0]!.single.map((v, j) => v + reused.grads[j]!);
    expect(bitwiseEqual(kept[0]!, own0)).toBe(true);
    for (let i = 1; i < N; i++) expect(bitwiseEqual(kept[i]!, peers[i]!.single)).toBe(true);
    let worst = 0;
    let scale = 0;
    for (let j = 0; j < own0.length; j++) {
      const want = kept[0]![j]! + kept[1]![j]! + kept[2]![j]!;
      worst = Math.max(worst, Math.abs(summed[0]!.grads[j]! - want));
      scale = Math.max(scale, Math.abs(want));
    }
    expect(worst / scale).toBeLessThan(1e-6);
    for (const o of summed) {
      expect(o.sentBytes).toBeGreaterThan(0);
      for (const v of Object.values(o.timings)) expect(Number.isFinite(v) && v >= 0).toBe(true);
    }
    expect(summed[0]!.lossSum).toBeGreaterThan(1.5);
  });

  it('arrays reused from a pool, full of old values (NaN): the same sums and kept sums, bit for bit, as new arrays', { timeout: 60_000 }, async () => {
    const reused = { grads: uniformF32(makeRng(98), peers[0]!.single.length).map((v) => v * 1e-3), lossSum: 1.5 };
    const n = peers[0]!.single.length;
    const pools = peers.map(() => {
      const pool = new GradArrays(n);
      for (let k = 0; k < 2; k++) pool.give(new Float32Array(n).fill(Number.NaN));
      return pool;
    });
    const fresh = await step({}, reused);
    const pooled = await step({}, reused, false, pools);
    for (let i = 0; i < N; i++) {
      const [a, b] = [fresh.outs[i]!, pooled.outs[i]!];
      if (a.kind !== 'summed' || b.kind !== 'summed') throw new Error(`outcomes ${a.kind}, ${b.kind}`);
      expect(bitwiseEqual(b.grads, a.grads)).toBe(true);
      expect(bitwiseEqual(pooled.kept[i]!, fresh.kept[i]!)).toBe(true);
      // Both arrays came from the pool.
      expect(pools[i]!.waiting).toBe(0);
    }
  });

  it('a ring that breaks mid-step is an outcome; the kept sums are whole', { timeout: 60_000 }, async () => {
    const { outs, kept } = await step({ stallTimeoutMs: 2000 }, null, true);
    expect(outs.map((o) => o.kind)).toEqual(['failed', 'failed', 'failed']);
    for (let i = 0; i < N; i++) expect(bitwiseEqual(kept[i]!, peers[i]!.single)).toBe(true);
  });
});
