// One real training step of the 224x224 models at batch 2 on the GPU: the loss is finite and
// drops when the same batch is repeated after a plain SGD step (w -= lr * g).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDevice } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { Model } from '../../src/nn/model.ts';
import { type ModelName, modelByName } from '../../src/nn/models.ts';
import { axpy } from '../../src/ops/eltwise.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WebGpuEngine } from '../../src/backend/webgpu.ts';

describe('224x224 models train one step at batch 2', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await getDevice();
  });
  afterAll(() => gpu?.destroy());

  for (const [name, lr] of [['alexnet-bn', 0.01], ['resnet50', 0.05]] as [ModelName, number][]) {
    it(`${name}: finite loss that drops on the repeated batch`, async () => {
      const model = new Model(new WebGpuEngine(gpu), modelByName(name), { seed: 1 });
      const x = gpu.upload(uniformF32(makeRng(2), 2 * 3 * 224 * 224), [2, 3, 224, 224]);
      gpu.write(model.labelsTensor(2), Int32Array.from([3, 997]));
      const lossOf = async (train: boolean): Promise<number> => {
        model.zeroGrads();
        model.forward(x, { train: true, seed: 5 });
        const total = model.loss(1 / 2);
        if (train) {
          model.backward();
          axpy(gpu, -lr, model.grads, model.params);
        }
        return (await gpu.readF32(total))[0]! / 2;
      };
      const first = await lossOf(true);
      const second = await lossOf(false);
      gpu.release(x);
      model.destroy();
      expect(Number.isFinite(first)).toBe(true);
      expect(first).toBeGreaterThan(Math.log(1000) * 0.5); // roughly uniform over 1000 classes at init
      expect(second).toBeLessThan(first);
    }, 300_000);
  }
});
