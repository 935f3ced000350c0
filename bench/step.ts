// `npm run bench -- step`: images/s of a whole training step (forward, loss, backward, update,
// loss read back) for the small CNN and ResNet-20 at batch 64 on 32x32x3, ours (LARS) against
// the SAME models trained by TF.js on its WebGPU backend (SGD with momentum) on the same
// device in the same run. Medians of timed steps after warm-up. Last line:
// {"bench":"step","ours_ips":..,"peer_ips":..,"ratio":..} (geometric means over the models).
import { getDevice } from '../src/gpu/device.ts';
import { Model } from '../src/nn/model.ts';
import { type ModelSpec } from '../src/nn/graph.ts';
import { resnet20, smallCnn } from '../src/nn/models.ts';
import { autotuneGemm } from '../src/ops/gemm-tune.ts';
import { createOptimizer, parseOptimizerConfig } from '../src/optim/index.ts';
import { recordGradients, recordUpdate } from '../src/train/step.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { timeTfTraining } from './tfjs-model.ts';
import { tfjsOnDevice } from './tfjs-webgpu.ts';
import { geomean, median } from './timing.ts';
import { WebGpuEngine } from '../src/backend/webgpu.ts';

interface Row { model: string; batch: number; oursIps: number; peerIps: number; oursMs: number; peerMs: number; oursLoss: number[]; peerLoss: number[] }

export async function main(args: string[]): Promise<void> {
  const batch = Number(args.find((a) => a.startsWith('--batch='))?.slice(8) ?? 64);
  // Timed steps per side after 2 warm-up steps. TF.js takes tens of seconds per ResNet-20 step
  // on llvmpipe, so the default keeps the whole run to a few minutes.
  const steps = Number(args.find((a) => a.startsWith('--steps='))?.slice(8) ?? 3);
  const gpu = await getDevice();
  await autotuneGemm(gpu);
  await tfjsOnDevice(gpu);
  const rows: Row[] = [];
  for (const spec of [smallCnn([3, 32, 32], 10), resnet20([3, 32, 32], 10)] as ModelSpec[]) {
    const rng = makeRng(1);
    const x = uniformF32(rng, batch * 3 * 32 * 32);
    const labels = Int32Array.from({ length: batch }, () => rng.int(10));
    // Ours: LARS step on the GPU, one loss readback per step.
    const model = new Model(new WebGpuEngine(gpu), spec, { seed: 1 });
    const opt = createOptimizer(gpu, parseOptimizerConfig({ kind: 'lars', lr: 0.1, totalSteps: 1000 }), model.layout.params, model.layout.paramFloats);
    const tx = gpu.upload(x, [batch, 3, 32, 32]);
    gpu.write(model.labelsTensor(batch), labels);
    const oursLoss: number[] = [], oursMs: number[] = [];
    for (let s = 0; s < steps + 2; s++) {
      const t0 = performance.now();
      const total = recordGradients(model, tx, s);
      recordUpdate(model, opt, s, batch);
      const loss = (await gpu.readF32(total))[0]! / batch;
      if (s >= 2) { oursMs.push(performance.now() - t0); oursLoss.push(loss); }
    }
    gpu.release(tx);
    opt.destroy();
    model.destroy();
    // Peer: the same model in TF.js (NHWC), SGD with momentum, loss read back each step.
    const { ms: peerMs, loss: peerLoss } = await timeTfTraining(spec, x, labels, batch, steps);
    const row: Row = { model: spec.name, batch, oursMs: median(oursMs), peerMs: median(peerMs), oursIps: batch / (median(oursMs) / 1000), peerIps: batch / (median(peerMs) / 1000), oursLoss, peerLoss };
    rows.push(row);
    console.error(`${spec.name.padEnd(10)} batch ${batch}: ours ${row.oursIps.toFixed(1)} img/s (${row.oursMs.toFixed(0)} ms/step)  tfjs ${row.peerIps.toFixed(1)} img/s (${row.peerMs.toFixed(0)} ms/step)  x${(row.oursIps / row.peerIps).toFixed(2)}; losses ours ${oursLoss.map((l) => l.toFixed(3)).join(' ')} | tfjs ${peerLoss.map((l) => l.toFixed(3)).join(' ')}`);
    if (!oursLoss.every(Number.isFinite)) throw new Error(`${spec.name}: our loss is not finite: ${oursLoss}`);
  }
  const summary = {
    bench: 'step',
    ours_ips: +geomean(rows.map((r) => r.oursIps)).toFixed(2),
    peer_ips: +geomean(rows.map((r) => r.peerIps)).toFixed(2),
    ratio: +geomean(rows.map((r) => r.oursIps / r.peerIps)).toFixed(3),
  };
  writeFileEnsuringDir('bench/results/step.json', JSON.stringify({ device: gpu.info, peer: 'TF.js WebGPU backend, same device, SGD+momentum', rows, summary }, null, 2));
  writeFileEnsuringDir('bench/results/step.svg', barChartSvg({
    title: `Training step, batch ${batch}, 32x32x3: ours vs TF.js WebGPU`, yLabel: 'images/s (median)',
    categories: rows.map((r) => r.model),
    series: [{ name: 'ours (LARS)', values: rows.map((r) => r.oursIps) }, { name: 'TF.js WebGPU (momentum)', values: rows.map((r) => r.peerIps) }],
  }));
  console.log(JSON.stringify(summary));
}
