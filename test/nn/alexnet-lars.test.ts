// AlexNet-BN (the LARS paper's model) takes two real LARS steps at batch 2 on the GPU. Its
// flat buffers (61M floats, 244 MB) exceed one storage binding here (llvmpipe: 128 MiB) and
// fc6 alone (37.7M floats, 151 MB) does too, so the optimiser walks the layout in windows
// and splits fc6: the loss must be finite and drop on the repeated batch, every tensor must
// move, and fc6's first update must apply the rate of the float64 formula with its whole-tensor norms.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDevice } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import type { ParamTensor } from '../../src/nn/layout.ts';
import { Model } from '../../src/nn/model.ts';
import { modelByName } from '../../src/nn/models.ts';
import { maxBindingElems } from '../../src/ops/reduce.ts';
import { createOptimizer, learningRate, parseOptimizerConfig } from '../../src/optim/index.ts';
import { buildUpdateTable, ROW_U32 } from '../../src/optim/table.ts';
import { trustRatio } from '../../src/ref/optim.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WebGpuEngine } from '../../src/backend/webgpu.ts';

const BATCH = 2;

describe('AlexNet-BN trains with LARS over buffers larger than one binding', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await getDevice();
  });
  afterAll(() => gpu?.destroy());

  it('two LARS steps at batch 2: finite loss that drops, every tensor moves, fc6 as float64', async () => {
    const model = new Model(new WebGpuEngine(gpu), modelByName('alexnet-bn'), { seed: 1 });
    const { params, paramFloats } = model.layout;
    const fc6 = params.reduce((a, p) => (p.length > a.length ? p : a));
    // Otherwise this test would not exercise the windows and the split segment.
    expect(paramFloats * 4).toBeGreaterThan(gpu.maxBindingBytes);
    expect(fc6.length * 4).toBeGreaterThan(gpu.maxBindingBytes);
    expect(paramFloats * 4).toBeLessThanOrEqual(gpu.limits.maxBufferSize);

    const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.05, totalSteps: 10 });
    const opt = createOptimizer(gpu, cfg, params, paramFloats);
    const x = gpu.upload(uniformF32(makeRng(2), BATCH * 3 * 224 * 224), [BATCH, 3, 224, 224]);
    gpu.write(model.labelsTensor(BATCH), Int32Array.from([3, 997]));
    const read = async (p: ParamTensor, what: 'w' | 'g'): Promise<Float32Array> =>
      gpu.readF32(gpu.view(what === 'w' ? model.params : model.grads, p.offset, [p.length]));
    // A sample of every tensor: its first and last (up to) 1024 floats (64-float aligned).
    const sample = async (): Promise<Float32Array[]> => Promise.all(params.flatMap((p) => {
      const k = Math.min(1024, p.length), last = p.offset + Math.floor((p.length - k) / 64) * 64;
      return [gpu.readF32(gpu.view(model.params, p.offset, [k])), gpu.readF32(gpu.view(model.params, last, [k]))];
    }));

    const before = await sample();
    let fc6Before: Float32Array | null = null;
    const losses: number[] = [];
    for (let t = 0; t < 3; t++) {
      model.zeroGrads();
      model.forward(x, { train: true, seed: 5 });
      const total = model.loss(1); // dlogits summed over the batch: G is a gradient SUM
      if (t < 2) model.backward();
      losses.push((await gpu.readF32(total))[0]! / BATCH);
      if (t === 0) {
        // fc6 by the float64 formula of the first step (v = 0): w1 = w0 - lr lambda (g + beta w0).
        fc6Before = await read(fc6, 'w');
        const G = await read(fc6, 'g');
        opt.step({ w: model.params, g: model.grads, t, gradScale: 1 / BATCH });
        const after = await read(fc6, 'w');
        let ww = 0, gg = 0;
        for (let i = 0; i < fc6.length; i++) { ww += fc6Before[i]! ** 2; gg += (G[i]! / BATCH) ** 2; }
        const beta = cfg.weightDecay, rate = learningRate(cfg, 0) * trustRatio(Math.sqrt(ww), Math.sqrt(gg), cfg.eta, beta, fc6.adapt);
        // The rate the GPU applied to each piece of fc6 (one per window), by least squares over
        // the piece (w0 - w1 = rate d): single floats round at ~1e-3 of so small a step, the
        // fit averages that away. Every piece must use the whole tensor's norms.
        const table = buildUpdateTable(params, paramFloats, { maxElems: maxBindingElems(gpu), align: gpu.limits.minStorageBufferOffsetAlignment / 4 });
        const pieces = table.windows.flatMap((win) =>
          Array.from({ length: win.rows }, (_, k) => table.rows.subarray((win.firstRow + k) * ROW_U32, (win.firstRow + k + 1) * ROW_U32))
            .filter((r) => r[4] === params.indexOf(fc6))
            .map((r) => [win.base + r[0]! - fc6.offset, r[1]!] as const));
        expect(pieces.length).toBeGreaterThan(1);
        for (const [start, len] of pieces) {
          let num = 0, den = 0;
          for (let i = start; i < start + len; i++) {
            const w0 = fc6Before[i]!, d = G[i]! / BATCH + beta * w0;
            num += (w0 - after[i]!) * d;
            den += d * d;
          }
          expect(Math.abs(num / den / rate - 1), `fc6 piece at ${start}`).toBeLessThan(1e-3);
        }
      } else if (t === 1) {
        opt.step({ w: model.params, g: model.grads, t, gradScale: 1 / BATCH });
      }
    }
    const after = await sample();
    gpu.release(x);
    opt.destroy();
    model.destroy();

    const seen = `losses ${losses.join(', ')}`;
    expect(losses.every(Number.isFinite), seen).toBe(true);
    expect(losses[0]!, seen).toBeGreaterThan(Math.log(1000) * 0.5); // roughly uniform at init
    expect(losses[1]!, seen).toBeLessThan(losses[0]!);
    expect(losses[2]!, seen).toBeLessThan(losses[1]!);
    // Every tensor moved (where a unit's inputs are dead at both samples, a small part of a
    // tensor may rightly keep its bits: decay alone moves it by less than one ulp).
    params.forEach((p, i) => {
      const moved = [0, 1].some((end) => after[2 * i + end]!.some((v, j) => v !== before[2 * i + end]![j]));
      expect(moved, `${p.name} moved`).toBe(true);
      expect(after[2 * i]!.every(Number.isFinite) && after[2 * i + 1]!.every(Number.isFinite), `${p.name} finite`).toBe(true);
    });
  }, 300_000);
});
