// What fits the device (src/nn/fit.ts): the footprint per image measured on both engines, the
// micro-batch it gives within a budget, and slices cut into micro-batches of whole BN groups.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEngine, EngineMemory } from '../../src/backend/engine.ts';
import { VtError } from '../../src/errors.ts';
import { FOOTPRINT_MARGIN, RESERVE_SHARE, fitMicroBatch, footprintOf, measureFootprint, microBatches } from '../../src/nn/fit.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { Model } from '../../src/nn/model.ts';
import { resnet20 } from '../../src/nn/models.ts';
import { createEngine } from '../ops/engines.ts';

const MiB = 2 ** 20;
const memory = (o: Partial<EngineMemory>): EngineMemory => ({ usedBytes: 0, peakBytes: 0, limitBytes: 1024 * MiB, maxTensorBytes: 1024 * MiB, ...o });

describe('fitMicroBatch', () => {
  const f = { perImageBytes: 10 * MiB, largestPerImageBytes: 2 * MiB, msPerImage: 1 };

  it('takes what the budget holds less the reserve and what is used, in whole groups', () => {
    const free = 1024 * MiB * (1 - RESERVE_SHARE) - 100 * MiB;
    const most = Math.floor(free / (10 * MiB * FOOTPRINT_MARGIN));
    expect(fitMicroBatch(f, memory({ usedBytes: 100 * MiB }), 1)).toMatchObject({ images: most, bound: 'memory' });
    expect(fitMicroBatch(f, memory({ usedBytes: 100 * MiB }), 8).images).toBe(Math.floor(most / 8) * 8);
    expect(
      fitMicroBatch(f, memory({ limitBytes: null }), 1, { memoryBytes: 256 * MiB }).images,
    ).toBe(Math.floor(256 * MiB * (1 - RESERVE_SHARE) / (10 * MiB * FOOTPRINT_MARGIN)));
  });

  it('is bounded by the largest buffer and by a limit given', () => {
    expect(fitMicroBatch(f, memory({ maxTensorBytes: 20 * MiB }), 1)).toMatchObject({ images: 10, bound: 'buffer' });
    expect(fitMicroBatch(f, memory({}), 2, { maxImages: 7 })).toMatchObject({ images: 6, bound: 'limit' });
  });

  it('says what to do when not even one group fits', () => {
    expect(() => fitMicroBatch(f, memory({ limitBytes: 64 * MiB }), 32)).toThrow(
      /one BN group of 32 images does not fit this device: it needs about 368 MiB and \d+ MiB are free .*smaller bnGroup/,
    );
    expect(() => fitMicroBatch(f, memory({}), 4, { maxImages: 2 })).toThrow(/the micro-batch limit is 2 images: raise it to at least 4/);
    expect(() => fitMicroBatch(f, memory({ maxTensorBytes: MiB }), 1)).toThrow(VtError);
  });
});

describe('microBatches', () => {
  const ids = Array.from({ length: 40 }, (_, i) => 100 + i);

  it('cuts a slice into as few, as even micro-batches of whole groups as fit, in order', () => {
    const parts = microBatches(ids, { images: 16, group: 4 });
    expect(parts.map((p) => p.length)).toEqual([12, 12, 16]);
    expect(parts.flat()).toEqual(ids);
    expect(microBatches(ids, { images: 64, group: 4 })).toEqual([ids]);
    expect(microBatches([], { images: 8, group: 4 })).toEqual([]);
    expect(microBatches(ids.slice(0, 7), { images: 3, group: 1 }).map((p) => p.length)).toEqual([2, 2, 3]);
  });

  it('refuses a slice that is not whole groups', () => {
    expect(() => microBatches(ids.slice(0, 10), { images: 8, group: 4 })).toThrow(/not whole BN groups of 4/);
  });
});

for (const backend of ['wasm', 'webgpu'] as const) {
  describe(`the footprint of ResNet-20 on ${backend}`, () => {
    let e: AnyEngine;
    beforeAll(async () => { e = await createEngine(backend); });
    afterAll(() => e?.destroy());

    it('is at least what its layout keeps per image, measured the same twice, and leaves nothing allocated', async () => {
      const spec = resnet20([3, 32, 32], 10);
      const before = e.memory().usedBytes;
      const f = await measureFootprint(e, spec);
      const floor = layoutOf(spec).shapes.reduce((n, s) => n + 8 * s.reduce((a, b) => a * b, 1), 0);
      expect(f.perImageBytes).toBeGreaterThanOrEqual(floor);
      // Activations, their gradients, saved statistics and scratch: a few times the floor, never wildly more.
      expect(f.perImageBytes).toBeLessThan(8 * floor);
      expect(f.largestPerImageBytes).toBe(16 * 32 * 32 * 4);
      // Timed too: the coordinator's first-step silence allowance (JoinRequest.probeMsPerImage).
      expect(f.msPerImage).toBeGreaterThan(0);
      expect(f.msPerImage).toBeLessThan(60_000);
      const again = await measureFootprint(e, spec);
      expect(Math.abs(again.perImageBytes - f.perImageBytes) / f.perImageBytes).toBeLessThan(0.05);
      // Only scratch an engine keeps for its kernels may stay (wasm keeps its grown scratch blocks).
      expect(e.memory().usedBytes - before).toBeLessThan(f.perImageBytes * 4);
      expect(await footprintOf(e, spec)).toBe(await footprintOf(e, spec));
    });

    it('a micro-batch sized from it trains without running out of a budget just above it', async () => {
      const spec = resnet20([3, 32, 32], 10);
      const model = new Model(e, spec, { seed: 1, bnGroup: 2 });
      try {
        const f = await footprintOf(e, spec);
        const budget = (e.memory().usedBytes + 6.5 * f.perImageBytes * FOOTPRINT_MARGIN) / (1 - RESERVE_SHARE);
        const fit = fitMicroBatch(f, e.memory(), 2, { memoryBytes: budget });
        expect(fit.images).toBe(6);
        e.resetPeak();
        const x = e.zeros([fit.images, 3, 32, 32]);
        e.write(model.labelsTensor(fit.images), new Int32Array(fit.images));
        model.forward(x, { train: true, seed: 1 });
        model.loss(1);
        model.backward();
        e.flush();
        await e.readF32(model.grads);
        e.release(x);
        expect(e.memory().peakBytes).toBeLessThanOrEqual(budget);
      } finally {
        model.destroy();
      }
    });
  });
}
