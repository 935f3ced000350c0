// One real training step of ResNet-50 at 224x224 on the GPU: the loss is finite and drops when
// the same image is repeated after a plain SGD step (w -= lr * g). One image: batch norm still
// normalises over each channel's 7x7 to 112x112 positions, and llvmpipe takes ~25 s an image.
// AlexNet-BN's step at 224x224 (batch 2, LARS, buffers past one binding) is alexnet-lars.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDevice } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { Model } from '../../src/nn/model.ts';
import { modelByName } from '../../src/nn/models.ts';
import { axpy } from '../../src/ops/eltwise.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WebGpuEngine } from '../../src/backend/webgpu.ts';

describe('ResNet-50 at 224x224 trains one step', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await getDevice();
  });
  afterAll(() => gpu?.destroy());

  it('resnet50: finite loss that drops on the repeated image', async () => {
    const model = new Model(new WebGpuEngine(gpu), modelByName('resnet50'), { seed: 1 });
    const x = gpu.upload(uniformF32(makeRng(2), 3 * 224 * 224), [1, 3, 224, 224]);
    gpu.write(model.labelsTensor(1), Int32Array.from([997]));
    const lossOf = async (train: boolean): Promise<number> => {
      model.zeroGrads();
      model.forward(x, { train: true, seed: 5 });
      const total = model.loss(1);
      if (train) {
        model.backward();
        axpy(gpu, -0.05, model.grads, model.params);
      }
      return (await gpu.readF32(total))[0]!;
    };
    const first = await lossOf(true);
    const second = await lossOf(false);
    gpu.release(x);
    model.destroy();
    expect(Number.isFinite(first)).toBe(true);
    expect(first).toBeGreaterThan(Math.log(1000) * 0.5); // roughly uniform over 1000 classes at init
    expect(second).toBeLessThan(first);
  }, 300_000);
});
