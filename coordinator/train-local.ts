// The main job for now: one headless peer trains a model on an embedded data set with LARS,
// with a progress bar (step, epoch, loss, accuracy, images/s) and periodic evaluation.
// The coordinator with many peers builds on this (same step, same sampler, same optimiser).
import { getDevice } from '../src/gpu/device.ts';
import { Model } from '../src/nn/model.ts';
import { type ModelName, MODEL_NAMES, modelByName } from '../src/nn/models.ts';
import { layoutOf, summary } from '../src/nn/layout.ts';
import { autotuneGemm } from '../src/ops/gemm-tune.ts';
import { createOptimizer, parseOptimizerConfig } from '../src/optim/index.ts';
import { trainLocal } from '../src/train/local.ts';
import { stepsPerEpoch } from '../src/train/sampler.ts';
import { ProgressPrinter } from '../src/train/progress.ts';
import { Args } from './args.ts';
import { type DatasetName, DEFAULT_CACHE_DIR, ensureDataset } from './data/cli.ts';
import { localLoaders } from './data/loaders.ts';
import { join } from 'node:path';

export const TRAIN_USAGE = `usage: npm start -- [options]
  --dataset cifar10|mnist     embedded data set (default cifar10; built into .cache/data on first use)
  --model small-cnn|resnet20  (default small-cnn; alexnet, alexnet-bn, resnet50 need 224x224 data)
  --batch N                   global batch (default 32)
  --steps N | --epochs E      how long (default 200 steps)
  --optimizer lars|sgd        (default lars)   --lr X (default 0.5 for LARS, 0.05 for SGD)
  --warmup N                  warm-up steps (default 20)
  --eval-every N              evaluate every N steps (default 50)  --eval-samples N (default 500)
  --seed N                    (default 1)      --cache DIR (default .cache/data)`;

export async function trainLocalMain(argv: readonly string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${TRAIN_USAGE}\n`);
    return;
  }
  const a = new Args(argv);
  const dataset = a.oneOf<DatasetName>('dataset', ['cifar10', 'mnist'], 'cifar10');
  const modelName = a.oneOf<ModelName>('model', MODEL_NAMES, 'small-cnn');
  const batch = a.int('batch', 32, 1);
  const kind = a.oneOf('optimizer', ['lars', 'sgd'] as const, 'lars');
  const lr = a.num('lr', kind === 'lars' ? 0.5 : 0.05, (v) => v > 0, 'a positive number');
  const warmup = a.int('warmup', 20);
  const evalEvery = a.int('eval-every', 50);
  const evalSamples = a.int('eval-samples', 500);
  const seed = a.int('seed', 1);
  const cache = a.str('cache', DEFAULT_CACHE_DIR);
  const stepsArg = a.int('steps', 0);
  const epochs = a.num('epochs', 0, (v) => v >= 0, 'a number >= 0');
  a.rejectUnknown(TRAIN_USAGE);

  const manifest = await ensureDataset(dataset, cache);
  const { channels, height, width } = manifest.image;
  const spec = modelByName(modelName, [channels, height, width], manifest.classes.length);
  if (spec.input[1] !== height || spec.input[2] !== width) {
    throw new Error(`${modelName} takes ${spec.input[1]}x${spec.input[2]} images; ${dataset} has ${height}x${width}: choose small-cnn or resnet20`);
  }
  const nTrain = manifest.splits.train.samples;
  const steps = stepsArg > 0 ? stepsArg : epochs > 0 ? Math.ceil(epochs * stepsPerEpoch(nTrain, batch)) : 200;

  const gpu = await getDevice();
  const tune = await autotuneGemm(gpu);
  process.stderr.write(`device: ${gpu.info.description} (gemm ${tune.config.entry})\n`);
  process.stderr.write(`${summary(spec, layoutOf(spec)).split('\n').slice(-1)[0]}\n`);
  const model = new Model(gpu, spec, { seed });
  const optimizer = createOptimizer(gpu, parseOptimizerConfig({ kind, lr, totalSteps: steps, warmupSteps: Math.min(warmup, steps - 1) }), model.layout.params, model.layout.paramFloats);
  const { train, evalLoader, evalIds } = localLoaders(manifest, join(cache, dataset), seed, evalSamples);
  process.stderr.write(`training ${modelName} on ${dataset} (${nTrain} images), batch ${batch}, ${steps} steps, ${kind} lr ${lr}; evaluating on ${evalIds.length} test images every ${evalEvery} steps\n`);

  const printer = new ProgressPrinter(process.stderr);
  const state = { step: 0, totalSteps: steps, epoch: 0, loss: null as number | null, top1: null as number | null, imagesPerSec: null as number | null };
  let stop = false;
  process.once('SIGINT', () => { stop = true; process.stderr.write('\nstopping after this step...\n'); });
  const result = await trainLocal({
    gpu, model, optimizer, train, trainSamples: nTrain, evalLoader, evalIds, globalBatch: batch, steps, seed, evalEvery,
    onStep: (r) => {
      state.step = r.step; state.epoch = r.epoch; state.loss = r.loss;
      state.imagesPerSec = state.imagesPerSec === null ? r.imagesPerSec : 0.8 * state.imagesPerSec + 0.2 * r.imagesPerSec;
      printer.update(state);
    },
    onEval: (step, r) => {
      state.top1 = r.top1;
      printer.update(state, true);
      process.stderr.write(`\n  eval @ step ${step}: top-1 ${(r.top1 * 100).toFixed(1)}%, top-5 ${(r.top5 * 100).toFixed(1)}%, loss ${r.loss.toFixed(4)} on ${r.samples} test images\n`);
    },
    shouldStop: () => stop,
  });
  printer.done(state);
  const last = result.evals[result.evals.length - 1];
  process.stdout.write(`${JSON.stringify({ job: 'train-local', model: modelName, dataset, steps: result.steps, loss: +result.lastLoss.toFixed(4), top1: last ? +last.result.top1.toFixed(4) : null })}\n`);
  optimizer.destroy();
  model.destroy();
  gpu.destroy();
}
