// `npm run bench -- ops`: where the wasm engine's training step spends its time, per phase
// (forward, loss, backward, the gradient read back, the host optimiser, the weights written)
// and per op (convolutions split by kernel size and stride and by pass, batch norm, ReLU, ...),
// for ResNet-20 (32x32, batch 64) and ResNet-50 (64x64, batch 16) on 1 and 2 threads. The wasm
// engine runs each op synchronously when called (threads included), so a timing wrapper around
// the engine the model calls sees each op's whole time. Convolution and GEMM rows carry their
// FLOPs and GFLOP/s, read against the wasm SIMD peak measured in the same run
// (bench/simd-peak.ts). Medians over the timed steps after 2 warm-up steps.
// Options: --models=NAME@SIDE:BATCH,... (default resnet20@32:64,resnet50@64:16), --threads=1,2,
// --steps=N, --winograd=auto|off (off: every convolution on im2col, as before Winograd), --fma=auto|off (off: the
// GEMM kernels multiply then add, as before relaxed SIMD; the peak is then the mul-add loop's).
// Last line: {"bench":"ops","winograd":..,"simd_peak_gflops":..,"runs":[{"model","threads","step_ms","gflops",
// "peak_share","top":[[op, share], ...]}, ...]}
import type { Engine } from '../src/backend/engine.ts';
import { Model } from '../src/nn/model.ts';
import { parseOptimizerConfig } from '../src/optim/index.ts';
import { WasmHostOptimizer } from '../src/optim/host-wasm.ts';
import { conv2dShape, type Conv2dParams } from '../src/shapes/conv2d.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { type FmaMode, fusedFor, WasmEngine } from '../src/wasm/engine.ts';
import type { WasmTensor } from '../src/wasm/tensor.ts';
import { parseFma, parseWinograd } from './wasm-options.ts';
import type { WinogradMode } from '../src/wasm/ops-winograd.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { compilePeak, simdPeakGflops } from './simd-peak.ts';
import { parseStepModels, stepLabel, type StepModel } from './step-models.ts';
import { median } from './timing.ts';

interface OpTotals { ms: number; flops: number; calls: number }
type Sample = Map<string, OpTotals>;

const PASS: Record<string, string> = { conv2dForward: 'fwd', conv2dBackwardInput: 'bwd-data', conv2dBackwardFilter: 'bwd-filter' };

/** The row an engine call is counted in, and its FLOPs (convolutions and GEMMs only). */
function classify(method: string, args: unknown[]): { key: string; flops: number } {
  const shape = (i: number) => (args[i] as WasmTensor).shape;
  if (method in PASS) {
    // x (or dx) and w are the first two tensors of every pass but bwd-filter (x, dy, dw).
    const x = method === 'conv2dBackwardInput' ? shape(2) : shape(0);
    const w = method === 'conv2dBackwardFilter' ? shape(2) : shape(1);
    const p = args[3] as Conv2dParams;
    const y = conv2dShape(x, w, p);
    const s = typeof p.stride === 'number' ? p.stride : p.stride[0];
    const macs = y[0]! * y[1]! * y[2]! * y[3]! * w[1]! * w[2]! * w[3]!;
    return { key: `conv ${w[2]}x${w[3]} s${s} ${PASS[method]}`, flops: 2 * macs };
  }
  if (method === 'gemm') {
    const a = shape(0), c = shape(2);
    const p = (args[3] ?? {}) as { transA?: boolean };
    const K = p.transA ? a[a.length - 2]! : a[a.length - 1]!;
    return { key: 'gemm (linear)', flops: 2 * c.reduce((x, y) => x * y, 1) * K };
  }
  if (method.startsWith('batchNorm')) {
    return { key: `batch norm${method.startsWith('batchNormRelu') ? ' + relu' : ''} ${method.endsWith('Backward') ? 'bwd' : 'fwd'}`, flops: 0 };
  }
  if (method === 'biasRelu') return { key: 'bias + relu fwd', flops: 0 };
  if (method === 'reluBiasBackward') return { key: 'bias + relu bwd', flops: 0 };
  if (method === 'poolReluBiasBackward') return { key: 'pool + relu + bias bwd', flops: 0 };
  if (method.startsWith('relu')) return { key: method === 'reluBackward' ? 'relu bwd' : 'relu fwd', flops: 0 };
  if (/Pool/.test(method)) return { key: 'pooling', flops: 0 };
  if (method === 'add' || method === 'addInPlace') return { key: 'residual add', flops: 0 };
  if (method === 'fill' || method === 'copy' || method === 'write' || method === 'view') return { key: `${method} (memory)`, flops: 0 };
  if (method === 'softmaxXent') return { key: 'softmax + loss', flops: 0 };
  return { key: method, flops: 0 };
}

/** The engine the model calls: every op method timed into `sample` under `phase`. */
function timed(engine: WasmEngine, state: { sample: Sample; phase: string }): Engine<WasmTensor> {
  const skip = new Set(['empty', 'zeros', 'release', 'memory', 'resetPeak', 'destroy', 'read', 'readF32', 'flush', 'upload']);
  return new Proxy(engine, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function' || typeof prop !== 'string' || skip.has(prop)) return typeof v === 'function' ? v.bind(target) : v;
      return (...args: unknown[]) => {
        const t0 = performance.now();
        const r = (v as (...a: unknown[]) => unknown).apply(target, args);
        const ms = performance.now() - t0;
        const { key, flops } = classify(prop, args);
        const name = `${state.phase}: ${key}`;
        const e = state.sample.get(name) ?? { ms: 0, flops: 0, calls: 0 };
        e.ms += ms; e.flops += flops; e.calls++;
        state.sample.set(name, e);
        return r;
      };
    },
  }) as unknown as Engine<WasmTensor>;
}

interface Run { model: string; threads: number; stepMs: number; rows: { op: string; ms: number; share: number; gflops: number | null; calls: number }[] }

async function profile(m: StepModel, threads: number, steps: number, winograd: WinogradMode, fma: FmaMode): Promise<Run> {
  // One job of the pool per op (batch: false): queued ops would all count where the queue runs.
  const engine = await WasmEngine.create({ threads, winograd, fma, batch: false });
  const state = { sample: new Map() as Sample, phase: 'setup' };
  const model = new Model(timed(engine, state), m.spec, { seed: 1 });
  const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.1, totalSteps: 1000 });
  const rng = makeRng(1);
  const tx = engine.upload(uniformF32(rng, m.batch * 3 * m.side * m.side), [m.batch, 3, m.side, m.side]);
  engine.write(model.labelsTensor(m.batch), Int32Array.from({ length: m.batch }, () => rng.int(m.spec.classes)));
  const opt = await WasmHostOptimizer.create(model.layout.paramFloats);
  opt.w.set(await model.readParams());
  const samples: Sample[] = [], stepMs: number[] = [];
  const G = new Float32Array(model.layout.paramFloats);
  const host = (phase: string, f: () => void | Promise<void>) => async () => {
    const t0 = performance.now();
    await f();
    const e = state.sample.get(phase) ?? { ms: 0, flops: 0, calls: 0 };
    e.ms += performance.now() - t0; e.calls++;
    state.sample.set(phase, e);
  };
  try {
    for (let s = 0; s < steps + 2; s++) {
      state.sample = new Map();
      const t0 = performance.now();
      state.phase = 'forward';
      model.zeroGrads();
      model.forward(tx, { train: true, seed: s });
      state.phase = 'loss';
      const total = model.loss(1);
      await engine.readF32(total);
      state.phase = 'backward';
      model.backward();
      // Into a host array reused from step to step, as volunteers read theirs (src/train/grad-arrays.ts).
      await host('host: read gradient', () => engine.readF32Into(model.grads, G, 0))();
      await host('host: LARS (float64, wasm)', () => { opt.G.set(G); opt.step(cfg, model.layout.params, s, 1 / m.batch); })();
      await host('host: write weights', () => engine.write(model.params, opt.w))();
      if (s >= 2) { stepMs.push(performance.now() - t0); samples.push(state.sample); }
    }
  } finally {
    engine.release(tx);
    model.destroy();
    engine.destroy();
  }
  const step = median(stepMs);
  const names = new Set(samples.flatMap((x) => [...x.keys()]));
  const rows = [...names].map((op) => {
    const ms = median(samples.map((x) => x.get(op)?.ms ?? 0));
    const flops = samples[0]!.get(op)?.flops ?? 0;
    return { op, ms, share: ms / step, gflops: flops ? flops / (ms / 1e3) / 1e9 : null, calls: samples[0]!.get(op)?.calls ?? 0 };
  }).sort((a, b) => b.ms - a.ms);
  const covered = rows.reduce((s, r) => s + r.ms, 0);
  rows.push({ op: 'other (between ops)', ms: step - covered, share: (step - covered) / step, gflops: null, calls: 0 });
  return { model: stepLabel(m), threads, stepMs: step, rows };
}

export async function main(args: string[]): Promise<void> {
  const opt = (k: string) => args.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
  const models = parseStepModels(opt('models') ?? 'resnet20@32:64,resnet50@64:16');
  const threadList = (opt('threads') ?? '1,2').split(',').map(Number);
  const steps = Number(opt('steps') ?? 3);
  const winograd = parseWinograd(args);
  const fmaMode = parseFma(args);
  const fma = await fusedFor(fmaMode);
  // The ceiling of the multiply-add the engine's kernels use.
  const binary = await compilePeak(fma ? 'fma' : 'mul-add');
  // One thread count at a time: run together, they would share the cores.
  const peak = new Map<number, number>();
  for (const t of threadList) peak.set(t, await simdPeakGflops(binary, t));
  const runs: Run[] = [];
  for (const m of models) {
    for (const t of threadList) {
      const r = await profile(m, t, steps, winograd, fmaMode);
      runs.push(r);
      const flops = r.rows.reduce((s, x) => s + (x.gflops ? x.gflops * x.ms : 0), 0) / r.stepMs;
      console.error(`\n${r.model}, ${t} thread(s): ${r.stepMs.toFixed(0)} ms/step, convolutions and GEMMs at ${flops.toFixed(1)} GFLOP/s over the step ` +
        `(wasm SIMD ${fma ? 'FMA' : 'mul+add'} peak ${peak.get(t)!.toFixed(1)})`);
      for (const x of r.rows) {
        const g = x.gflops === null ? '' : `${x.gflops.toFixed(1).padStart(6)} GFLOP/s (${((100 * x.gflops) / peak.get(t)!).toFixed(0)}% of peak)`;
        console.error(`  ${x.op.padEnd(36)} ${x.ms.toFixed(1).padStart(8)} ms ${(100 * x.share).toFixed(1).padStart(5)}%  ${g}`);
      }
    }
  }
  const summary = {
    bench: 'ops',
    winograd,
    fma,
    simd_peak_gflops: Object.fromEntries([...peak].map(([t, g]) => [`${t}t`, +g.toFixed(1)])),
    runs: runs.map((r) => {
      const gflops = r.rows.reduce((s, x) => s + (x.gflops ? x.gflops * x.ms : 0), 0) / r.stepMs;
      return {
        model: r.model, threads: r.threads, step_ms: +r.stepMs.toFixed(1), gflops: +gflops.toFixed(2), peak_share: +(gflops / peak.get(r.threads)!).toFixed(3),
        top: r.rows.slice(0, 6).map((x) => [x.op, +x.share.toFixed(3)]),
      };
    }),
  };
  writeFileEnsuringDir('bench/results/ops.json', JSON.stringify({ peak: Object.fromEntries(peak), runs, summary }, null, 2));
  const ops = [...new Set(runs.flatMap((r) => r.rows.slice(0, 10).map((x) => x.op)))];
  writeFileEnsuringDir('bench/results/ops.svg', barChartSvg({
    title: 'Where a wasm training step goes: share of the step per op and phase', yLabel: 'share of the step',
    categories: ops,
    series: runs.map((r) => ({ name: `${r.model}, ${r.threads}t`, values: ops.map((o) => r.rows.find((x) => x.op === o)?.share ?? 0) })),
  }));
  console.log(JSON.stringify(summary));
}
