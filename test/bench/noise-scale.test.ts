// The gradient noise scale estimate (bench/noise-scale.ts): the estimator recovers |G|^2 and
// tr(Sigma) of a known distribution of per-sample gradients, is exact where there is no noise,
// and the measurement on the wasm engine equals the same estimate computed in float64 from
// per-sample gradients (a batch's gradient is the sum of its samples' for a model without BN).
import { describe, expect, it } from 'vitest';
import { measureNoiseScale, noiseScaleOf, sqNorm, type BatchSource } from '../../bench/noise-scale.ts';
import { modelByName } from '../../src/nn/models.ts';
import { Model } from '../../src/nn/model.ts';
import { makeRng } from '../../src/rng.ts';
import { recordGradients, uploadBatch, type HostBatch } from '../../src/train/step.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';

/** Means of disjoint batches of b consecutive per-sample vectors: E|g_b|^2 and |g_B|^2 (B = all). */
function batchNorms(samples: Float64Array[], b: number): { smallSq: number; largeSq: number } {
  const d = samples[0]!.length;
  const k = samples.length / b;
  const all = new Float64Array(d);
  let smallSq = 0;
  for (let i = 0; i < k; i++) {
    const m = new Float64Array(d);
    for (let j = 0; j < b; j++) samples[i * b + j]!.forEach((v, q) => { m[q] = m[q]! + v / b; all[q] = all[q]! + v; });
    smallSq += sqNorm(m) / k;
  }
  return { smallSq, largeSq: sqNorm(all.map((v) => v / samples.length)) };
}

describe('noiseScaleOf', () => {
  it('recovers |G|^2 and tr(Sigma) of per-sample gradients drawn around a known mean', () => {
    const rng = makeRng(5);
    const d = 40;
    const G = Float64Array.from({ length: d }, (_, i) => (i % 3 === 0 ? 0.5 : -0.25));
    const sigma = Float64Array.from({ length: d }, (_, i) => 0.5 + (i % 5) * 0.25);
    const samples = Array.from({ length: 24_000 }, () => G.map((g, i) => g + sigma[i]! * rng.normal()));
    const b = 8;
    const { smallSq, largeSq } = batchNorms(samples, b);
    const est = noiseScaleOf(smallSq, largeSq, b, samples.length);
    const trueGradSq = sqNorm(G);
    const trueTrace = sqNorm(sigma);
    expect(Math.abs(est.gradSq - trueGradSq) / trueGradSq).toBeLessThan(0.1);
    expect(Math.abs(est.traceSigma - trueTrace) / trueTrace).toBeLessThan(0.05);
    expect(Math.abs(est.bSimple! - trueTrace / trueGradSq) / (trueTrace / trueGradSq)).toBeLessThan(0.12);
  });

  it('is exact without noise (B_simple 0) and reports no scale when the signal estimate is not positive', () => {
    const est = noiseScaleOf(2.5, 2.5, 4, 64);
    expect(est.gradSq).toBeCloseTo(2.5, 12);
    expect(est.traceSigma).toBeCloseTo(0, 12);
    expect(est.bSimple).toBeCloseTo(0, 12);
    // All noise: E|g_b|^2 = tr/b, |g_B|^2 = tr/B exactly gives |G|^2 = 0.
    expect(noiseScaleOf(10 / 4, 10 / 64, 4, 64)).toMatchObject({ bSimple: null });
    expect(noiseScaleOf(10 / 4, 10 / 64, 4, 64).traceSigma).toBeCloseTo(10, 10);
  });

  it('refuses sizes that are not 1 <= b < B and negative norms', () => {
    expect(() => noiseScaleOf(1, 1, 8, 8)).toThrow(/need integers 1 <= b < B, got b = 8, B = 8/);
    expect(() => noiseScaleOf(1, 1, 0, 8)).toThrow(/1 <= b < B/);
    expect(() => noiseScaleOf(-1, 1, 2, 8)).toThrow(/squared norms must be >= 0/);
  });
});

describe('measureNoiseScale on the wasm engine', () => {
  it('equals the estimate from per-sample gradients (float64), and leaves the weights alone', async () => {
    const engine = await WasmEngine.create({ threads: 1 });
    const spec = modelByName('tiny-cnn', [2, 7, 9], 3);
    const model = new Model(engine, spec, { seed: 3 });
    try {
      const rng = makeRng(9);
      const n = 12;
      const per = 2 * 7 * 9;
      const xs = Float32Array.from({ length: n * per }, () => rng.normal());
      const labels = Int32Array.from({ length: n }, (_, i) => (i * 7) % 3);
      const source: BatchSource = {
        load: async (ids: readonly number[]): Promise<HostBatch> => ({
          x: Float32Array.from(ids.flatMap((id) => [...xs.subarray(id * per, (id + 1) * per)])),
          labels: Int32Array.from(ids.map((id) => labels[id]!)),
          shape: [ids.length, 2, 7, 9],
        }),
      };
      const ids = [4, 0, 7, 11, 2, 9, 1, 5, 10, 3, 8, 6];
      const before = await engine.readF32(model.params);
      const got = await measureNoiseScale(engine, model, source, ids, 3, 0, 17);
      expect(await engine.readF32(model.params)).toEqual(before);

      // Per-sample gradients, one sample at a time, in float64.
      const samples: Float64Array[] = [];
      let x = null;
      for (const id of ids) {
        x = uploadBatch(model, await source.load([id], 0), x);
        recordGradients(model, x, 1);
        samples.push(Float64Array.from(await engine.readF32(model.grads)));
      }
      if (x) engine.release(x);
      const { smallSq, largeSq } = batchNorms(samples, 3);
      const want = noiseScaleOf(smallSq, largeSq, 3, ids.length);
      expect(got.small).toBe(3);
      expect(got.large).toBe(12);
      expect(Math.abs(got.traceSigma - want.traceSigma) / Math.abs(want.traceSigma)).toBeLessThan(1e-4);
      expect(Math.abs(got.gradSq - want.gradSq) / Math.abs(want.gradSq)).toBeLessThan(1e-3);
      await expect(measureNoiseScale(engine, model, source, ids.slice(0, 3), 3, 0, 1)).rejects.toThrow(/must be at least 2 batches of 3/);
    } finally {
      model.destroy();
      engine.destroy();
    }
  });
});
