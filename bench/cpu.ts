// `npm run bench -- cpu`: training images/s on the CPU, our wasm SIMD path (src/wasm, the whole
// volunteer step: forward, loss, backward, gradient read back, LARS on the host, weights written
// back) against two peers in the same run on the same models, shapes and batch:
//   - TF.js on its WebAssembly backend (XNNPACK, SIMD; SGD with momentum), 1 thread (TF.js's
//     Node wasm build has no threads);
//   - PyTorch on the CPU (bench/torch_cpu.py: Debian's python3-torch with OpenBLAS, installed
//     on demand by bench/torch-peer.ts; the model built from our spec), at 1 and 2 threads, one
//     process per thread count, with glibc keeping the memory PyTorch frees (--torch-malloc=steady, the default;
//     `default` runs glibc as it comes, whose page faults made PyTorch's step 1x-4x slower from step to step here:
//     bench/torch-peer.ts). Runs 1-15 of docs/results/cpu.json timed PyTorch as it comes (no `torch_malloc` key).
// Models: the small CNN and ResNet-20 on 32x32x3 at batch 64 (ours at 1 and 2 threads, TF.js,
// PyTorch at 1 and 2), and ResNet-50 on 64x64x3 at batch 16 (ours and PyTorch at 2 threads:
// 1.5 GB of activations, minutes per step on one thread). Also the machine's wasm SIMD peak
// (bench/simd-peak.ts) and what share of it ResNet-20 reaches. Medians of timed steps after 2
// warm-up steps. Options: --batch=N --steps=N --resnet50-batch=N, --no-resnet50, --no-torch,
// --no-install (use a PyTorch that is there, install none), --winograd=auto|f2|off (f2: F(2x2, 3x3) only, as
// before F(4x4, 3x3); off: our 3x3 convolutions on im2col, as before Winograd), --fma=auto|off (off: our GEMM
// kernels multiply then add, as before relaxed SIMD).
// simd_peak_gflops is the peak of the multiply-add our kernels use (FMA where the runtime has relaxed SIMD);
// simd_peak_mul_add_gflops that of a multiply then an add; fma_speedup_resnet20_1t/_2t: the fused build's step
// against the plain one's, one step each in turn in one process (bench/fma-ab.ts; --no-fma-ab skips it);
// wg4_speedup_resnet20_1t/_2t: Winograd 'auto' (F(4x4, 3x3) on maps of 8x8 and more, all three passes since session 56;
// the forward and input gradient only before) against 'f2' (F(2x2, 3x3) on the same layers), the same way
// (bench/engine-ab.ts; --no-wg4-ab skips it; only with --winograd=auto).
// torch_conv_isa: the kernel oneDNN runs PyTorch's convolutions with (read from its verbose line; jit:avx512_core on the
// EPYC host: 16 float lanes, where wasm SIMD has 4); torch_blas_core: the kernels OpenBLAS chose (Cooperlake, AVX-512, here).
// --torch-isa=avx2 holds PyTorch to AVX2 (8 lanes: oneDNN's jit:avx2, OpenBLAS's Haswell kernels), the widest most lab
// desktops have, and every ratio is then against that PyTorch (torch_isa says which; bench/torch-peer.ts TorchIsa).
// PyTorch is timed before and after ours, and each *_vs_torch_* ratio is over the geometric mean of the two;
// torch_drift is the largest change between them (how far this host's speed moved during the run). `paired_vs_torch`
// has the same ratios from ours and PyTorch's steps in alternation (bench/torch-pairs.ts: --pairs=N rounds, default
// 7, of 3 steps each side, 2 for ResNet-50, 0 skips them; the median of the rounds' ratios), because this host's
// speed moves by 20-50% within seconds under load. (Runs 14 and 15 of docs/results/cpu.json gave the paired ratios
// as the *_vs_torch_* keys, with `torch_paired: true`, and the apart ones as `unpaired_vs_torch`.)
// resnet20_ceiling_vs_torch_2t, resnet50_64_ceiling_vs_torch_2t: the most the 2-thread ratio could be if every
// multiply-add ran at the FMA peak measured here and every 3x3 stride-1 pass saved F(4x4, 3x3)'s 4x (bench/flops.ts).
// Last line: {"bench":"cpu","ours_ips":..,"peer_ips":..,"ratio":..,"ours_ips_2t":..,"speedup_2t":..,
// "torch_version":..,"small_cnn_vs_torch_1t":..,"small_cnn_vs_torch_2t":..,"resnet20_vs_torch_1t":..,
// "resnet20_vs_torch_2t":..,"resnet50_64_vs_torch_2t":..,"simd_peak_gflops":..,"resnet20_gflops_2t":..,"fma":..,...}
// (ours_ips, peer_ips, ratio: geometric means over the 32x32 models, 1 thread vs TF.js's 1).
import * as tf from '@tensorflow/tfjs-core';
import type { ModelSpec } from '../src/nn/graph.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { fusedFor, WasmEngine } from '../src/wasm/engine.ts';
import { engineAb, type EngineAb } from './engine-ab.ts';
import { fmaAb, type FmaAb } from './fma-ab.ts';
import { fewestFlopsPerImage, trainingFlopsPerImage } from './flops.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { compilePeak, simdPeakGflops } from './simd-peak.ts';
import { parseStepModels, stepLabel, type StepModel } from './step-models.ts';
import { timeTfTraining } from './tfjs-model.ts';
import { tfjsWasm } from './tfjs-wasm.ts';
import { parseTorchIsa, parseTorchMalloc, runTorchCpu, torchPython, type TorchRun } from './torch-peer.ts';
import { pairedRatio, type PairedRatio, TorchServer } from './torch-pairs.ts';
import { geomean, median } from './timing.ts';
import { parseFma, parseWinograd } from './wasm-options.ts';
import { wasmStepper } from './wasm-step.ts';

interface Row {
  model: string; batch: number; flopsPerImage: number; fewestFlopsPerImage: number;
  oursIps: number | null; ours2Ips: number; peerIps: number | null; torchIps: number | null; torch2Ips: number | null;
  oursLoss: number[]; ours2Loss: number[]; peerLoss: number[];
}

const arg = (args: string[], name: string, def: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def);

/** Our volunteer's step on the wasm engine (bench/wasm-step.ts): the per-step times and losses after 2 warm-up steps. */
async function ours(
  engine: WasmEngine, spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number, steps: number,
): Promise<{ ms: number[]; loss: number[] }> {
  const stepper = await wasmStepper(engine, spec, x, labels, batch);
  const ms: number[] = [], loss: number[] = [];
  try {
    for (let s = 0; s < steps + 2; s++) {
      const r = await stepper.step();
      if (s >= 2) { ms.push(r.ms); loss.push(r.loss); }
    }
  } finally {
    stepper.destroy();
  }
  return { ms, loss };
}

/** The batch every timed step trains on: uniform images and labels from seed 1. */
function batchOf(m: StepModel): { x: Float32Array; labels: Int32Array } {
  const { spec } = m;
  const rng = makeRng(1);
  const x = uniformF32(rng, m.batch * spec.input[0] * spec.input[1] * spec.input[2]);
  return { x, labels: Int32Array.from({ length: m.batch }, () => rng.int(spec.classes)) };
}

const torchIps = (run: TorchRun | null, m: StepModel) => run?.rows.find((r) => r.model === stepLabel(m))?.ips ?? null;
const r3 = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? null : +v.toFixed(3));

export async function main(args: string[]): Promise<void> {
  const batch = arg(args, 'batch', 64);
  const steps = arg(args, 'steps', 5);
  const small = parseStepModels(`small-cnn@32:${batch},resnet20@32:${batch}`);
  const big = args.includes('--no-resnet50') ? [] : parseStepModels(`resnet50@64:${arg(args, 'resnet50-batch', 16)}`);
  const models = [...small, ...big];
  const torchMalloc = parseTorchMalloc(args);
  const torchIsa = parseTorchIsa(args);
  const torchName = torchIsa === 'avx2' ? 'PyTorch (AVX2)' : 'PyTorch';
  const torchOf = (py: string, list: StepModel[], t: number) => runTorchCpu(py, list, t, steps, torchMalloc, undefined, torchIsa);
  // The PyTorch peer first: installing it (once) takes a minute, and a failure is said up front.
  let torch1: TorchRun | null = null, torch2: TorchRun | null = null, torchNote = 'not run (--no-torch)';
  let python: string | null = null;
  if (!args.includes('--no-torch')) {
    const py = torchPython(!args.includes('--no-install'));
    if ('why' in py) {
      torchNote = py.why;
      console.error(`cpu: PyTorch peer not run: ${py.why}`);
    } else {
      python = py.python;
      torch1 = torchOf(py.python, small, 1);
      torch2 = torchOf(py.python, models, 2);
      torchNote = `PyTorch ${torch1.torch_version} (${torch1.blas} BLAS on ${torch1.blas_core}, mkldnn ${torch1.mkldnn}, convolutions on `
        + `${torch1.conv_isa}${torchIsa === 'avx2' ? ', held to AVX2' : ''}, glibc malloc ${torchMalloc}), SGD+momentum`;
    }
  }
  const winograd = parseWinograd(args);
  const fmaMode = parseFma(args);
  const fma = await fusedFor(fmaMode);
  const plain = await compilePeak('mul-add');
  const plain1 = await simdPeakGflops(plain, 1), plain2 = await simdPeakGflops(plain, 2);
  console.error(`wasm SIMD peak (f32x4 mul+add, 12 chains): ${plain1.toFixed(1)} GFLOP/s on 1 thread, ${plain2.toFixed(1)} on 2`);
  let peak1 = plain1, peak2 = plain2;
  if (fma) {
    const fused = await compilePeak('fma');
    peak1 = await simdPeakGflops(fused, 1);
    peak2 = await simdPeakGflops(fused, 2);
    console.error(`wasm SIMD peak (f32x4 relaxed_madd, 12 chains): ${peak1.toFixed(1)} GFLOP/s on 1 thread, ${peak2.toFixed(1)} on 2`);
  }
  const { threads } = await tfjsWasm();
  const engine = await WasmEngine.create({ threads: 1, winograd, fma: fmaMode });
  const engine2 = await WasmEngine.create({ threads: 2, winograd, fma: fmaMode });
  const rows: Row[] = [];
  try {
    for (const m of models) {
      const { spec } = m;
      const { x, labels } = batchOf(m);
      const ips = (ms: number[]) => m.batch / (median(ms) / 1000);
      const cifar = small.includes(m);
      const o = cifar ? await ours(engine, spec, x, labels, m.batch, steps) : null;
      const p = cifar ? await timeTfTraining(spec, x, labels, m.batch, steps) : null;
      const o2 = await ours(engine2, spec, x, labels, m.batch, steps);
      const row: Row = {
        model: stepLabel(m), batch: m.batch, flopsPerImage: trainingFlopsPerImage(spec), fewestFlopsPerImage: fewestFlopsPerImage(spec),
        oursIps: o ? ips(o.ms) : null, ours2Ips: ips(o2.ms), peerIps: p ? ips(p.ms) : null,
        torchIps: torchIps(torch1, m), torch2Ips: torchIps(torch2, m), oursLoss: o?.loss ?? [], ours2Loss: o2.loss, peerLoss: p?.loss ?? [],
      };
      rows.push(row);
      const f = (v: number | null) => (v === null ? '   n/a' : v.toFixed(1).padStart(6));
      console.error(`${row.model.padEnd(16)} img/s: ours 1t ${f(row.oursIps)}  tfjs-wasm 1t ${f(row.peerIps)}  torch 1t ${f(row.torchIps)}  ` +
        `ours 2t ${f(row.ours2Ips)}  torch 2t ${f(row.torch2Ips)}`);
      if (!o2.loss.every(Number.isFinite)) throw new Error(`${row.model}: our loss is not finite: ${o2.loss}`);
      // Threads give the same bits: the same losses, step for step.
      if (o && o2.loss.some((l, i) => l !== o.loss[i])) throw new Error(`${row.model}: losses with 2 threads ${o2.loss} differ from 1 thread ${o.loss}`);
    }
  } finally {
    engine.destroy();
    engine2.destroy();
  }
  // The fused build against the plain one step for step (ResNet-20, 1 and 2 threads): a ratio the drift of this host's speed cannot bend.
  const ab: FmaAb[] = [];
  const r20Model = small.find((m) => stepLabel(m).startsWith('resnet20@'));
  if (fma && r20Model && !args.includes('--no-fma-ab')) {
    const { x, labels } = batchOf(r20Model);
    for (const t of [1, 2]) {
      const r = await fmaAb(r20Model.spec, x, labels, r20Model.batch, t, winograd, steps);
      ab.push(r);
      console.error(`resnet20 ${t}t fused vs plain, step for step: ${r.fusedMs.toFixed(0)} ms vs ${r.plainMs.toFixed(0)} ms: ${r.speedup.toFixed(2)}x`);
    }
  }
  const abOf = (t: number) => r3(ab.find((r) => r.threads === t)?.speedup);
  // F(4x4, 3x3) against F(2x2, 3x3) on the same layers, step for step (ResNet-20, 1 and 2 threads).
  const wg4: EngineAb[] = [];
  if (winograd === 'auto' && r20Model && !args.includes('--no-wg4-ab')) {
    const { x, labels } = batchOf(r20Model);
    for (const t of [1, 2]) {
      const r = await engineAb(r20Model.spec, x, labels, r20Model.batch, t, { winograd: 'auto', fma: fmaMode }, { winograd: 'f2', fma: fmaMode }, steps);
      wg4.push(r);
      console.error(`resnet20 ${t}t F(4x4, 3x3) vs F(2x2, 3x3), step for step: ${r.aMs.toFixed(0)} ms vs ${r.bMs.toFixed(0)} ms: ${r.speedup.toFixed(2)}x`);
    }
  }
  const wg4Of = (t: number) => r3(wg4.find((r) => r.threads === t)?.speedup);
  // PyTorch again after ours: this host's speed drifts, so each ratio is over the geometric mean of PyTorch before and after.
  let torchAfter: [TorchRun, TorchRun] | null = null;
  let torchDrift: number | null = null;
  if (python) {
    torchAfter = [torchOf(python, small, 1), torchOf(python, models, 2)];
    const drifts: number[] = [];
    for (const [i, r] of rows.entries()) {
      const m = models[i]!;
      const a1 = torchIps(torchAfter[0], m), a2 = torchIps(torchAfter[1], m);
      if (r.torchIps !== null && a1 !== null) { drifts.push(Math.abs(Math.log(a1 / r.torchIps))); r.torchIps = Math.sqrt(r.torchIps * a1); }
      if (r.torch2Ips !== null && a2 !== null) { drifts.push(Math.abs(Math.log(a2 / r.torch2Ips))); r.torch2Ips = Math.sqrt(r.torch2Ips * a2); }
    }
    torchDrift = drifts.length > 0 ? Math.exp(Math.max(...drifts)) - 1 : null;
    console.error(`PyTorch before vs after ours: the largest change ${((torchDrift ?? 0) * 100).toFixed(0)}% (the ratios use the mean of both)`);
  }
  // Ours and PyTorch's steps in alternation, each thread count with fresh engines and one PyTorch process.
  const pairs = arg(args, 'pairs', 7);
  const pairRuns = new Map<string, PairedRatio>();
  if (python && pairs > 0) {
    for (const [t, list] of [[1, small], [2, models]] as const) {
      const server = await TorchServer.start(python, list, t, torchMalloc, undefined, torchIsa);
      const e = await WasmEngine.create({ threads: t, winograd, fma: fmaMode });
      try {
        for (const m of list) {
          const { x, labels } = batchOf(m);
          const st = await wasmStepper(e, m.spec, x, labels, m.batch);
          try {
            for (let i = 0; i < 2; i++) await st.step();
            const oursSteps = async (k: number) => {
              const ms: number[] = [];
              for (let i = 0; i < k; i++) ms.push((await st.step()).ms);
              return ms;
            };
            const r = await pairedRatio(oursSteps, (k) => server.steps(stepLabel(m), k), pairs, m.name === 'resnet50' ? 2 : 3);
            pairRuns.set(`${stepLabel(m)} ${t}t`, r);
            console.error(`${stepLabel(m).padEnd(16)} ${t}t ours/PyTorch in ${pairs} alternating rounds: median ${r.ratio.toFixed(2)} `
              + `(rounds ${r.rounds.map((v) => v.toFixed(2)).join(' ')})`);
          } finally {
            st.destroy();
          }
        }
      } finally {
        e.destroy();
        server.close();
      }
    }
  }
  const pairOf = (r: Row | undefined, t: 1 | 2) => (r ? pairRuns.get(`${r.model} ${t}t`) : undefined);
  const cifarRows = rows.filter((r) => r.oursIps !== null);
  const by = (prefix: string) => rows.find((r) => r.model.startsWith(prefix));
  const vs = (r: Row | undefined, t: 1 | 2) => {
    const o = t === 1 ? r?.oursIps : r?.ours2Ips, p = t === 1 ? r?.torchIps : r?.torch2Ips;
    return o && p ? r3(o / p) : null;
  };
  const paired = (r: Row | undefined, t: 1 | 2) => r3(pairOf(r, t)?.ratio);
  // The most images/s the wasm path could reach at 2 threads (the SIMD peak over the fewest FLOPs, bench/flops.ts), over PyTorch's.
  const ceiling = (r: Row | undefined) => (r?.torch2Ips ? r3((peak2 * 1e9) / r.fewestFlopsPerImage / r.torch2Ips) : null);
  const r20 = by('resnet20@');
  const r20Gflops = r20 ? (r20.ours2Ips * r20.flopsPerImage) / 1e9 : null;
  const summary = {
    bench: 'cpu',
    winograd,
    fma,
    ours_ips: +geomean(cifarRows.map((r) => r.oursIps!)).toFixed(2),
    peer_ips: +geomean(cifarRows.map((r) => r.peerIps!)).toFixed(2),
    ratio: +geomean(cifarRows.map((r) => r.oursIps! / r.peerIps!)).toFixed(3),
    threads,
    ours_ips_2t: +geomean(cifarRows.map((r) => r.ours2Ips)).toFixed(2),
    speedup_2t: +geomean(cifarRows.map((r) => r.ours2Ips / r.oursIps!)).toFixed(3),
    torch_version: torch1?.torch_version ?? null,
    torch_blas: torch1?.blas ?? null,
    torch_conv_isa: torch1?.conv_isa ?? null,
    torch_blas_core: torch1?.blas_core ?? null,
    torch_isa: torchIsa,
    torch_malloc: torchMalloc,
    torch_drift: r3(torchDrift),
    torch_pair_rounds: pairRuns.size > 0 ? pairs : 0,
    paired_vs_torch: {
      small_cnn_1t: paired(by('small-cnn@'), 1), small_cnn_2t: paired(by('small-cnn@'), 2), resnet20_1t: paired(r20, 1),
      resnet20_2t: paired(r20, 2), resnet50_64_2t: paired(by('resnet50@64'), 2),
    },
    small_cnn_vs_torch_1t: vs(by('small-cnn@'), 1),
    small_cnn_vs_torch_2t: vs(by('small-cnn@'), 2),
    resnet20_vs_torch_1t: vs(r20, 1),
    resnet20_vs_torch_2t: vs(r20, 2),
    resnet50_64_vs_torch_2t: vs(by('resnet50@64'), 2),
    resnet20_ceiling_vs_torch_2t: ceiling(r20),
    resnet50_64_ceiling_vs_torch_2t: ceiling(by('resnet50@64')),
    simd_peak_gflops: +peak1.toFixed(1),
    simd_peak_gflops_2t: +peak2.toFixed(1),
    simd_peak_mul_add_gflops: +plain1.toFixed(1),
    simd_peak_mul_add_gflops_2t: +plain2.toFixed(1),
    fma_speedup_resnet20_1t: abOf(1),
    fma_speedup_resnet20_2t: abOf(2),
    wg4_speedup_resnet20_1t: wg4Of(1),
    wg4_speedup_resnet20_2t: wg4Of(2),
    resnet20_gflops_2t: r20Gflops === null ? null : +r20Gflops.toFixed(2),
    resnet20_peak_share_2t: r20Gflops === null ? null : r3(r20Gflops / peak2),
    by_model: Object.fromEntries(rows.map((r) => [r.model, {
      ours_ips: r3(r.oursIps), peer_ips: r3(r.peerIps), torch_ips: r3(r.torchIps), ours_ips_2t: r3(r.ours2Ips), torch_ips_2t: r3(r.torch2Ips),
      gflop_per_image: +(r.flopsPerImage / 1e9).toFixed(4), fewest_gflop_per_image: +(r.fewestFlopsPerImage / 1e9).toFixed(4),
      paired_rounds_1t: pairOf(r, 1)?.rounds.map(r3) ?? null, paired_rounds_2t: pairOf(r, 2)?.rounds.map(r3) ?? null,
    }])),
  };
  const peer = `TF.js ${tf.version_core} wasm backend (XNNPACK, SIMD), ${threads} thread(s), SGD+momentum`;
  writeFileEnsuringDir('bench/results/cpu.json', JSON.stringify({
    ours: engine.info.description, ours2: engine2.info.description, peer, torch: torchNote, torch1, torch2, torchAfter,
    simdPeak: { fma, peak1, peak2, plain1, plain2 }, fmaAb: ab, wg4Ab: wg4, rows, paired: Object.fromEntries(pairRuns), summary,
  }, null, 2));
  writeFileEnsuringDir('bench/results/cpu.svg', barChartSvg({
    title: 'Training on the CPU: ours (wasm SIMD) vs TF.js wasm and PyTorch, 1 and 2 threads', yLabel: 'images/s (median)',
    categories: rows.map((r) => r.model),
    series: [
      { name: 'ours: wasm SIMD (LARS), 1 thread', values: rows.map((r) => r.oursIps ?? NaN) },
      { name: 'TF.js wasm (momentum), 1 thread', values: rows.map((r) => r.peerIps ?? NaN) },
      { name: `${torchName}, 1 thread`, values: rows.map((r) => r.torchIps ?? NaN) },
      { name: 'ours, 2 threads', values: rows.map((r) => r.ours2Ips) },
      { name: `${torchName}, 2 threads`, values: rows.map((r) => r.torch2Ips ?? NaN) },
    ],
  }));
  console.log(JSON.stringify(summary));
}
