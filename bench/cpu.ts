// `npm run bench -- cpu`: training images/s on the CPU of the small CNN and ResNet-20 at batch
// 64 on 32x32x3: our wasm SIMD path (src/wasm, the whole volunteer step: forward, loss,
// backward, gradient read back, LARS on the host, weights written back) against the SAME models
// trained by TF.js on its WebAssembly backend (XNNPACK, SIMD; SGD with momentum) in the same
// process, with the same number of threads (1: TF.js's Node wasm build has no threads), plus a
// third series: ours with 2 threads (src/wasm/threads.ts). Medians of timed steps after 2
// warm-up steps. Last line: {"bench":"cpu","ours_ips":..,"peer_ips":..,"ratio":..,
// "ours_ips_2t":..,"speedup_2t":..,...} (geometric means over the models; ratio is 1 thread vs
// 1 thread, speedup_2t is ours with 2 threads over ours with 1).
import * as tf from '@tensorflow/tfjs-core';
import type { ModelSpec } from '../src/nn/graph.ts';
import { Model } from '../src/nn/model.ts';
import { resnet20, smallCnn } from '../src/nn/models.ts';
import { hostOptimizerStep, parseOptimizerConfig } from '../src/optim/index.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { recordGradients, uploadBatch } from '../src/train/step.ts';
import { WasmEngine } from '../src/wasm/engine.ts';
import type { WasmTensor } from '../src/wasm/tensor.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { timeTfTraining } from './tfjs-model.ts';
import { tfjsWasm } from './tfjs-wasm.ts';
import { geomean, median } from './timing.ts';

interface Row { model: string; batch: number; oursIps: number; peerIps: number; ours2Ips: number; oursMs: number; peerMs: number; ours2Ms: number; oursLoss: number[]; peerLoss: number[] }

const arg = (args: string[], name: string, def: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def);

/** Our volunteer's step on the wasm engine; returns the per-step times and losses. */
async function ours(engine: WasmEngine, spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number, steps: number): Promise<{ ms: number[]; loss: number[] }> {
  const model = new Model(engine, spec, { seed: 1 });
  const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.1, totalSteps: 1000 });
  const w = await model.readParams();
  const v = new Float32Array(w.length);
  const host = { x, labels, shape: [batch, 3, 32, 32] as const };
  let tx: WasmTensor | null = null;
  const ms: number[] = [], loss: number[] = [];
  try {
    for (let s = 0; s < steps + 2; s++) {
      const t0 = performance.now();
      tx = uploadBatch(model, host, tx);
      const total = recordGradients(model, tx, s);
      const l = (await engine.readF32(total))[0]! / batch;
      const G = await engine.readF32(model.grads);
      hostOptimizerStep(cfg, model.layout.params, { w, v, G, t: s, gradScale: 1 / batch });
      engine.write(model.params, w);
      if (s >= 2) { ms.push(performance.now() - t0); loss.push(l); }
    }
  } finally {
    if (tx) engine.release(tx);
    model.destroy();
  }
  return { ms, loss };
}

export async function main(args: string[]): Promise<void> {
  const batch = arg(args, 'batch', 64);
  const steps = arg(args, 'steps', 5);
  const { threads } = await tfjsWasm();
  const engine = await WasmEngine.create({ threads: 1 });
  const engine2 = await WasmEngine.create({ threads: 2 });
  const rows: Row[] = [];
  try {
    for (const spec of [smallCnn([3, 32, 32], 10), resnet20([3, 32, 32], 10)]) {
      const rng = makeRng(1);
      const x = uniformF32(rng, batch * 3 * 32 * 32);
      const labels = Int32Array.from({ length: batch }, () => rng.int(10));
      const o = await ours(engine, spec, x, labels, batch, steps);
      const p = await timeTfTraining(spec, x, labels, batch, steps);
      const o2 = await ours(engine2, spec, x, labels, batch, steps);
      const ips = (ms: number[]) => batch / (median(ms) / 1000);
      const row: Row = {
        model: spec.name, batch, oursMs: median(o.ms), peerMs: median(p.ms), ours2Ms: median(o2.ms),
        oursIps: ips(o.ms), peerIps: ips(p.ms), ours2Ips: ips(o2.ms), oursLoss: o.loss, peerLoss: p.loss,
      };
      rows.push(row);
      console.error(`${spec.name.padEnd(10)} batch ${batch}: ours (wasm) ${row.oursIps.toFixed(1)} img/s (${row.oursMs.toFixed(0)} ms/step)  tfjs-wasm ${row.peerIps.toFixed(1)} img/s (${row.peerMs.toFixed(0)} ms/step)  x${(row.oursIps / row.peerIps).toFixed(2)}  ours 2 threads ${row.ours2Ips.toFixed(1)} img/s (x${(row.ours2Ips / row.oursIps).toFixed(2)})`);
      if (!o.loss.every(Number.isFinite)) throw new Error(`${spec.name}: our loss is not finite: ${o.loss}`);
      // Threads give the same bits: the same losses, step for step.
      if (o2.loss.some((l, i) => l !== o.loss[i])) throw new Error(`${spec.name}: losses with 2 threads ${o2.loss} differ from 1 thread ${o.loss}`);
    }
  } finally {
    engine.destroy();
    engine2.destroy();
  }
  const summary = {
    bench: 'cpu',
    ours_ips: +geomean(rows.map((r) => r.oursIps)).toFixed(2),
    peer_ips: +geomean(rows.map((r) => r.peerIps)).toFixed(2),
    ratio: +geomean(rows.map((r) => r.oursIps / r.peerIps)).toFixed(3),
    threads,
    ours_ips_2t: +geomean(rows.map((r) => r.ours2Ips)).toFixed(2),
    speedup_2t: +geomean(rows.map((r) => r.ours2Ips / r.oursIps)).toFixed(3),
    by_model: Object.fromEntries(rows.map((r) => [r.model, {
      ours_ips: +r.oursIps.toFixed(2), peer_ips: +r.peerIps.toFixed(2), ratio: +(r.oursIps / r.peerIps).toFixed(3), ours_ips_2t: +r.ours2Ips.toFixed(2),
    }])),
  };
  writeFileEnsuringDir('bench/results/cpu.json', JSON.stringify({ ours: engine.info.description, ours2: engine2.info.description, peer: `TF.js ${tf.version_core} wasm backend (XNNPACK, SIMD), ${threads} thread(s), SGD+momentum`, rows, summary }, null, 2));
  writeFileEnsuringDir('bench/results/cpu.svg', barChartSvg({
    title: `Training on the CPU, batch ${batch}, 32x32x3: ours (wasm SIMD, 1 and 2 threads) vs TF.js wasm (${threads} thread)`, yLabel: 'images/s (median)',
    categories: rows.map((r) => r.model),
    series: [
      { name: 'ours: wasm SIMD (LARS), 1 thread', values: rows.map((r) => r.oursIps) },
      { name: 'TF.js wasm (momentum)', values: rows.map((r) => r.peerIps) },
      { name: 'ours, 2 threads', values: rows.map((r) => r.ours2Ips) },
    ],
  }));
  console.log(JSON.stringify(summary));
}
