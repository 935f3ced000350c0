// `npm run bench -- step`: images/s of a whole training step (forward, loss, backward, update,
// loss read back), ours (LARS on the GPU) against the SAME models trained by TF.js on its
// WebGPU backend (SGD with momentum) on the same device in the same run, and the host round
// trip a volunteer adds: the gradient read back, LARS on the host in float64 (src/optim/host.ts,
// what keeps a mixed ring's weights bitwise equal) and the weights uploaded again. Medians of
// timed steps after warm-up. Options: `--models=NAME@SIDE:BATCH,...` (bench/step-models.ts;
// default small CNN and ResNet-20 at 32x32, batch 64), `--batch=N` (the batch of items that
// name none), `--steps=N`, `--no-peer` (ours only: TF.js takes minutes per ResNet-50 step on
// llvmpipe). A model that fails (out of memory, say) is reported in its row and the others
// still run. Last line: {"bench":"step","ours_ips":..,"peer_ips":..,"ratio":..,"host_share":..}
// (geometric means over the models that ran; host_share the largest).
import { getDevice } from '../src/gpu/device.ts';
import type { Gpu } from '../src/gpu/runtime.ts';
import { Model } from '../src/nn/model.ts';
import { autotuneGemm } from '../src/ops/gemm-tune.ts';
import { createOptimizer, parseOptimizerConfig } from '../src/optim/index.ts';
import { hostOptimizerStep } from '../src/optim/host.ts';
import { initParams } from '../src/nn/layout.ts';
import { recordGradients, recordUpdate } from '../src/train/step.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { DEFAULT_STEP_MODELS, parseStepModels, stepLabel, type StepModel } from './step-models.ts';
import { timeTfTraining } from './tfjs-model.ts';
import { tfjsOnDevice } from './tfjs-webgpu.ts';
import { geomean, median } from './timing.ts';
import { WebGpuEngine } from '../src/backend/webgpu.ts';

interface Row {
  model: string; side: number; batch: number;
  oursIps: number; oursMs: number; oursLoss: number[];
  /** The volunteer's step: gradients on the GPU, then the host round trip. */
  gradMs: number; hostMs: number; hostShare: number; volunteerIps: number;
  peerIps: number | null; peerMs: number | null; peerLoss: number[];
  error?: string;
}

const LARS = parseOptimizerConfig({ kind: 'lars', lr: 0.1, totalSteps: 1000 });

async function oursRow(gpu: Gpu, m: StepModel, steps: number, x: Float32Array, labels: Int32Array): Promise<Omit<Row, 'peerIps' | 'peerMs' | 'peerLoss'>> {
  const { spec, batch, side } = m;
  const model = new Model(new WebGpuEngine(gpu), spec, { seed: 1 });
  const opt = createOptimizer(gpu, LARS, model.layout.params, model.layout.paramFloats);
  const tx = gpu.upload(x, [batch, 3, side, side]);
  try {
    gpu.write(model.labelsTensor(batch), labels);
    // The whole step on the GPU (our LARS kernel), one loss readback per step.
    const oursLoss: number[] = [], oursMs: number[] = [];
    for (let s = 0; s < steps + 2; s++) {
      const t0 = performance.now();
      const total = recordGradients(model, tx, s);
      recordUpdate(model, opt, s, batch);
      const loss = (await gpu.readF32(total))[0]! / batch;
      if (s >= 2) { oursMs.push(performance.now() - t0); oursLoss.push(loss); }
    }
    // As a volunteer steps: gradients (loss read back), then G read back, LARS on the host,
    // the new weights written; the write is waited for so the next step's time holds none of it.
    const w = initParams(model.layout, 1), v = new Float32Array(w.length);
    gpu.write(model.params, w);
    const gradMs: number[] = [], hostMs: number[] = [];
    for (let s = 0; s < steps + 2; s++) {
      const t0 = performance.now();
      const total = recordGradients(model, tx, s);
      await gpu.readF32(total);
      const t1 = performance.now();
      const G = await gpu.readF32(model.grads);
      hostOptimizerStep(LARS, model.layout.params, { w, v, G, t: s, gradScale: 1 / batch });
      gpu.write(model.params, w);
      await gpu.sync();
      if (s >= 2) { gradMs.push(t1 - t0); hostMs.push(performance.now() - t1); }
    }
    const ms = median(oursMs), g = median(gradMs), h = median(hostMs);
    return {
      model: spec.name, side, batch, oursMs: ms, oursIps: batch / (ms / 1e3), oursLoss,
      gradMs: g, hostMs: h, hostShare: h / (g + h), volunteerIps: batch / ((g + h) / 1e3),
    };
  } finally {
    gpu.release(tx);
    opt.destroy();
    model.destroy();
  }
}

const rowLabel = (r: Row) => stepLabel({ name: r.model, side: r.side, batch: r.batch });

function failedRow(m: StepModel, e: unknown): Row {
  return {
    model: m.spec.name, side: m.side, batch: m.batch, oursIps: NaN, oursMs: NaN, oursLoss: [], gradMs: NaN, hostMs: NaN, hostShare: NaN,
    volunteerIps: NaN, peerIps: null, peerMs: null, peerLoss: [], error: (e as Error).message ?? String(e),
  };
}

export async function main(args: string[]): Promise<void> {
  const opt = (k: string) => args.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
  const models = parseStepModels(opt('models') ?? DEFAULT_STEP_MODELS, Number(opt('batch') ?? 64));
  // Timed steps per side after 2 warm-up steps. TF.js takes tens of seconds per ResNet-20 step
  // on llvmpipe, so the default keeps the whole run to a few minutes.
  const steps = Number(opt('steps') ?? 3);
  const withPeer = !args.includes('--no-peer');
  const gpu = await getDevice();
  await autotuneGemm(gpu);
  if (withPeer) await tfjsOnDevice(gpu);
  console.error(`device: ${gpu.info.description}`);
  const rows: Row[] = [];
  for (const m of models) {
    const rng = makeRng(1);
    const x = uniformF32(rng, m.batch * 3 * m.side * m.side);
    const labels = Int32Array.from({ length: m.batch }, () => rng.int(m.spec.classes));
    let row: Row;
    try {
      const ours = await oursRow(gpu, m, steps, x, labels);
      if (!ours.oursLoss.every(Number.isFinite)) throw new Error(`our loss is not finite: ${ours.oursLoss}`);
      // Peer: the same model in TF.js (NHWC), SGD with momentum, loss read back each step.
      const peer = withPeer ? await timeTfTraining(m.spec, x, labels, m.batch, steps) : null;
      row = {
        ...ours, peerMs: peer ? median(peer.ms) : null, peerIps: peer ? m.batch / (median(peer.ms) / 1e3) : null, peerLoss: peer?.loss ?? [],
      };
      const peerText = row.peerIps === null ? 'tfjs not run'
        : `tfjs ${row.peerIps.toFixed(1)} img/s (${row.peerMs!.toFixed(0)} ms/step)  x${(row.oursIps / row.peerIps).toFixed(2)}`;
      console.error(`${stepLabel(m).padEnd(20)} ours ${row.oursIps.toFixed(1)} img/s (${row.oursMs.toFixed(0)} ms/step)  ${peerText}; ` +
        `volunteer step ${row.volunteerIps.toFixed(1)} img/s, host round trip ${row.hostMs.toFixed(1)} ms = ${(100 * row.hostShare).toFixed(1)}% of it`);
    } catch (e) {
      row = failedRow(m, e);
      console.error(`${stepLabel(m).padEnd(20)} FAILED: ${row.error}`);
    }
    rows.push(row);
  }
  const ran = rows.filter((r) => !r.error), paired = ran.filter((r) => r.peerIps !== null);
  const rounded = (v: number, d: number) => (Number.isFinite(v) ? +v.toFixed(d) : null);
  const summary = {
    bench: 'step',
    ours_ips: rounded(geomean(ran.map((r) => r.oursIps)), 2),
    peer_ips: paired.length ? rounded(geomean(paired.map((r) => r.peerIps!)), 2) : null,
    ratio: paired.length ? rounded(geomean(paired.map((r) => r.oursIps / r.peerIps!)), 3) : null,
    host_share: ran.length ? rounded(Math.max(...ran.map((r) => r.hostShare)), 3) : null,
    models: rows.map((r) => ({
      model: rowLabel(r), ips: rounded(r.oursIps, 2), peer_ips: r.peerIps === null ? null : rounded(r.peerIps, 2), host_share: rounded(r.hostShare, 3),
    })),
    failed: rows.filter((r) => r.error).map((r) => rowLabel(r)),
  };
  const peer = 'TF.js WebGPU backend, same device, SGD+momentum';
  writeFileEnsuringDir('bench/results/step.json', JSON.stringify({ device: gpu.info, peer, rows, summary }, null, 2));
  writeFileEnsuringDir('bench/results/step.svg', barChartSvg({
    title: `Training step on ${gpu.info.description.slice(0, 50)}: ours vs TF.js WebGPU`, yLabel: 'images/s (median)',
    categories: rows.map((r) => rowLabel(r)),
    series: [
      { name: 'ours (LARS on the GPU)', values: rows.map((r) => r.oursIps) },
      { name: 'ours as a volunteer (host LARS)', values: rows.map((r) => r.volunteerIps) },
      { name: 'TF.js WebGPU (momentum)', values: rows.map((r) => r.peerIps ?? NaN) },
    ],
  }));
  console.log(JSON.stringify(summary));
  if (ran.length === 0) process.exitCode = 1;
}
