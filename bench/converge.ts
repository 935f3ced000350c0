// `npm run bench -- converge`: the LARS paper's central claim at small scale, on real data.
// Three runs of the same model for the same number of epochs:
//   sgd_small: a small batch b with SGD + momentum (the reference accuracy),
//   sgd_large: a 64x larger batch with SGD + momentum, the rate scaled linearly with warm-up,
//   lars_large: the same large batch with LARS (You, Gitman, Ginsburg 2017).
// Default profile: MNIST (12,288 training images, 2,000 test images), a small CNN, b = 16,
// B = 1,024, 8 epochs: about 10-15 minutes on this 2-core machine with software WebGPU.
// `--full`: CIFAR-10 (all 50k), ResNet-20, b = 128, B = 8,192, 40 epochs, for a real GPU.
// Writes bench/results/converge.json and converge.svg (test top-1 against epoch) and prints
// {"bench":"converge","sgd_small":..,"sgd_large":..,"lars_large":..} (final top-1, %).
import { join } from 'node:path';
import { getDevice } from '../src/gpu/device.ts';
import type { Gpu } from '../src/gpu/runtime.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { GraphBuilder, type ModelSpec } from '../src/nn/graph.ts';
import { Model } from '../src/nn/model.ts';
import { resnet20 } from '../src/nn/models.ts';
import { autotuneGemm } from '../src/ops/gemm-tune.ts';
import { createOptimizer, parseOptimizerConfig } from '../src/optim/index.ts';
import { trainLocal } from '../src/train/local.ts';
import { stepsPerEpoch } from '../src/train/sampler.ts';
import { DEFAULT_CACHE_DIR, ensureDataset, type DatasetName } from '../coordinator/data/cli.ts';
import { localLoaders } from '../coordinator/data/loaders.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { lineChartSvg } from './plot-lines.ts';
import { WebGpuEngine } from '../src/backend/webgpu.ts';

interface Profile {
  dataset: DatasetName; trainSamples: number; evalSamples: number; epochs: number;
  small: number; large: number; smallLr: number; larsLr: number; warmupEpochs: number;
  model: (m: Manifest) => ModelSpec;
}

/** A small CNN for 28x28 digits: two conv blocks and a linear classifier (~10k parameters). */
function digitsCnn(m: Manifest): ModelSpec {
  const g = new GraphBuilder();
  let x = g.maxpool(g.relu(g.conv(g.input, 'conv1', 8, 3, { pad: 1 })), 2, 2);
  x = g.maxpool(g.relu(g.conv(x, 'conv2', 16, 3, { pad: 1 })), 2, 2);
  g.linear(g.flatten(x), 'fc', m.classes.length);
  return { name: 'digits-cnn', input: [m.image.channels, m.image.height, m.image.width], classes: m.classes.length, nodes: g.nodes };
}

const QUICK: Profile = { dataset: 'mnist', trainSamples: 12_288, evalSamples: 2000, epochs: 8, small: 16, large: 1024, smallLr: 0.02, larsLr: 8, warmupEpochs: 2, model: digitsCnn };
const FULL: Profile = { dataset: 'cifar10', trainSamples: 50_000, evalSamples: 10_000, epochs: 40, small: 128, large: 8192, smallLr: 0.1, larsLr: 10, warmupEpochs: 5, model: (m) => resnet20([m.image.channels, m.image.height, m.image.width], m.classes.length) };

interface RunResult { name: string; batch: number; optimizer: string; lr: number; curve: { epoch: number; top1: number; loss: number }[]; final: number; seconds: number }

async function run(gpu: Gpu, p: Profile, manifest: Manifest, name: string, batch: number, kind: 'sgd' | 'lars', lr: number, warmupEpochs: number): Promise<RunResult> {
  const spe = stepsPerEpoch(p.trainSamples, batch);
  const steps = spe * p.epochs;
  const spec = p.model(manifest);
  const model = new Model(new WebGpuEngine(gpu), spec, { seed: 7 });
  const opt = createOptimizer(gpu, parseOptimizerConfig({ kind, lr, totalSteps: steps, warmupSteps: Math.min(Math.round(warmupEpochs * spe), steps - 1), momentum: 0.9, weightDecay: 5e-4 }), model.layout.params, model.layout.paramFloats);
  const { train, evalLoader, evalIds } = localLoaders(manifest, join(DEFAULT_CACHE_DIR, p.dataset), 3, p.evalSamples);
  const t0 = performance.now();
  const curve: RunResult['curve'] = [];
  await trainLocal({
    gpu, model, optimizer: opt, train, trainSamples: p.trainSamples, evalLoader, evalIds, globalBatch: batch, steps, seed: 3, evalEvery: spe,
    onEval: (step, r) => {
      curve.push({ epoch: step / spe, top1: r.top1, loss: r.loss });
      process.stderr.write(`  ${name} epoch ${(step / spe).toFixed(0)}: top-1 ${(r.top1 * 100).toFixed(2)}%  loss ${r.loss.toFixed(4)}  (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
    },
  });
  opt.destroy();
  model.destroy();
  return { name, batch, optimizer: kind, lr, curve, final: curve[curve.length - 1]?.top1 ?? NaN, seconds: (performance.now() - t0) / 1000 };
}

export async function main(args: string[]): Promise<void> {
  const opt = (name: string): number | undefined => {
    const a = args.find((x) => x.startsWith(`--${name}=`));
    return a === undefined ? undefined : Number(a.slice(name.length + 3));
  };
  const base = args.includes('--full') ? FULL : QUICK;
  // Overrides for exploring: --epochs=N --small-lr=X --lars-lr=X --train=N
  const p: Profile = { ...base, epochs: opt('epochs') ?? base.epochs, smallLr: opt('small-lr') ?? base.smallLr, larsLr: opt('lars-lr') ?? base.larsLr, trainSamples: opt('train') ?? base.trainSamples };
  const manifest = await ensureDataset(p.dataset);
  const gpu = await getDevice();
  await autotuneGemm(gpu);
  const ratio = p.large / p.small;
  process.stderr.write(`converge: ${p.dataset} (${p.trainSamples} train / ${p.evalSamples} test), ${p.epochs} epochs, b=${p.small}, B=${p.large} (${ratio}x)\n`);
  // --runs=lars_large,... runs a subset (for exploring rates); the summary needs all three.
  const only = args.find((a) => a.startsWith('--runs='))?.slice(7).split(',');
  const plan: [string, number, 'sgd' | 'lars', number, number][] = [
    ['sgd_small', p.small, 'sgd', p.smallLr, 0],
    ['sgd_large', p.large, 'sgd', p.smallLr * ratio, p.warmupEpochs],
    ['lars_large', p.large, 'lars', p.larsLr, p.warmupEpochs],
  ];
  const runs: RunResult[] = [];
  for (const [name, b, kind, lr, warm] of plan) if (!only || only.includes(name)) runs.push(await run(gpu, p, manifest, name, b, kind, lr, warm));
  const pct = (name: string) => {
    const r = runs.find((x) => x.name === name);
    return r ? +(r.final * 100).toFixed(2) : null;
  };
  const summary = { bench: 'converge', sgd_small: pct('sgd_small'), sgd_large: pct('sgd_large'), lars_large: pct('lars_large') };
  writeFileEnsuringDir('bench/results/converge.json', JSON.stringify({ profile: { ...p, model: p.model(manifest).name }, device: gpu.info, runs, summary }, null, 2));
  writeFileEnsuringDir('bench/results/converge.svg', lineChartSvg({
    title: `${p.dataset}: test top-1 vs epoch (b=${p.small} SGD, B=${p.large} SGD / LARS)`, xLabel: 'epoch', yLabel: 'test top-1 (%)',
    series: runs.map((r) => ({ name: `${r.name} (lr ${r.lr})`, points: r.curve.map((c) => [c.epoch, c.top1 * 100] as [number, number]) })),
  }));
  gpu.destroy();
  console.log(JSON.stringify(summary));
}
