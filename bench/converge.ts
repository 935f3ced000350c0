// `npm run bench -- converge`: the LARS paper's central claim on real data, CIFAR-10 (all 50k
// training images, all 10k test images), the small CNN, on the wasm engine with both cores
// (the path every CPU volunteer trains with). Three runs of the same model for the same
// number of epochs:
//   sgd_small:  a small batch b with SGD + momentum (the reference accuracy),
//   sgd_large:  a batch B >= 16b with SGD + momentum, the rate scaled linearly (x B/b) with
//               warm-up (Goyal et al.),
//   lars_large: the same B with LARS (You, Gitman, Ginsburg: warm-up, poly(2), momentum 0.9,
//               weight decay 5e-4, biases excluded from adaptation and decay); a layer's bias
//               steps at its layer's rate (the weight's trust ratio), not at the global rate,
//               which at LARS's rates (~6) throws the biases about (--lars-biases=global).
// Every run decays its rate as poly(2) after its warm-up (--power=P changes all of them).
// The rates are searched first, in the bench: short runs train on 45k training images and are
// scored on the other 5k (never on the test split); sgd_small's rate is chosen, sgd_large
// scales it, and LARS gets its own rate (lr x eta, the trust coefficient, is the one knob),
// searched at a longer length than SGD's (4 epochs against 2 by default: a short run rewards a
// small rate, and the large batch has few steps). A grid whose best rate is on its edge is
// extended past it (at most two more rates each). Ablations at LARS's search length say what
// moves it: warm-up doubled, biases at the global rate, label smoothing 0.1, poly(1)
// instead of poly(2); and LARS's gap to the small batch at both search lengths says
// whether more epochs close it. `--ablate` repeats them at full length (one full run each).
// Profiles: the default (about 90 minutes here), `--quick` (a few minutes, a smoke test).
// Overrides: --model=NAME (small-cnn, small-cnn-bn, resnet20) --epochs=N --small=N --large=N
// --search-epochs=N --lars-search-epochs=N --warmup=EPOCHS (both large runs) --power=P
// --lars-wd=X (LARS's weight decay, search and final runs; default the paper's 5e-4)
// --lars-biases=layer|global (the rate of LARS's biases: their layer's, the default, or global);
// --noise-scale[=K] also measures the gradient noise scale B_simple after every epoch of the
// final runs, on K (default 64) batches of b training images (bench/noise-scale.ts; with BN
// those batches also enter the running statistics);
// --small-lr=X --lars-lr=X skip the search (both needed); --runs=NAME,NAME runs only those of
// the final runs (with --ablate also 'lars_large warm-up x2', 'lars_large biases adapted +
// decayed', 'lars_large biases at the global rate' (at their layer's trust ratio under
// --lars-biases=global), 'lars_large label smoothing 0.1', 'lars_large poly(1)' (poly(2) under
// --power=1), 'lars_large 2x epochs') and writes converge-runs.json / .svg instead, the missing keys null.
// Writes bench/results/converge.json and converge.svg; prints as its LAST line
// {"bench":"converge","sgd_small":..,"sgd_large":..,"lars_large":..,"dataset":..,"batch_small":..,
//  "batch_large":..,"epochs":..} (final test top-1, %).
import { join } from 'node:path';
import { fileShardSource } from '../src/data/node-source.ts';
import { nodeDecoder } from '../src/data/decode-node.ts';
import { BatchLoader, defaultAugment } from '../src/data/loader.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { modelByName, type ModelName } from '../src/nn/models.ts';
import { WasmEngine } from '../src/wasm/engine.ts';
import { Args } from '../src/cli/args.ts';
import { DEFAULT_CACHE_DIR, ensureDataset } from '../coordinator/data/cli.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { lineChartSvg } from './plot-lines.ts';
import { pastEdge } from './rate-grid.ts';
import { trainRun, type RunData, type RunResult, type RunSpec } from './converge-train.ts';

interface Profile {
  name: string;
  trainSamples: number;
  testSamples: number;
  epochs: number;
  small: number;
  large: number;
  warmupEpochs: number;
  /** Every run's rate decays as poly(power) after warm-up (the paper's 2). */
  power: number;
  /** The search: runs of searchEpochs on the first searchTrain ids, scored on the next searchVal. */
  searchEpochs: number;
  /**
   * LARS's rate is searched at this length (its ablations too): a short run rewards a small
   * rate (the short-horizon bias of Wu et al. 2018), more for the large batch's few steps.
   */
  larsSearchEpochs: number;
  searchTrain: number;
  searchVal: number;
  smallRates: number[];
  larsRates: number[];
}

const FULL: Profile = {
  name: 'full', trainSamples: 50_000, testSamples: 10_000, epochs: 10, small: 16, large: 512, warmupEpochs: 2, power: 2,
  searchEpochs: 2, larsSearchEpochs: 4, searchTrain: 45_000, searchVal: 5000, smallRates: [0.005, 0.01, 0.02], larsRates: [3, 6, 12],
};
const QUICK: Profile = {
  name: 'quick', trainSamples: 4096, testSamples: 1000, epochs: 2, small: 32, large: 512, warmupEpochs: 0.5, power: 2,
  searchEpochs: 1, larsSearchEpochs: 1, searchTrain: 3584, searchVal: 512, smallRates: [0.02, 0.05], larsRates: [4, 8],
};

const SEED = 7;
/** The models a CIFAR-10 run can train (32x32 inputs; the ImageNet models need larger ones). */
const CIFAR_MODELS: readonly ModelName[] = ['small-cnn', 'small-cnn-bn', 'resnet20'];
const DEFAULT_MODEL: ModelName = 'small-cnn';
/** --noise-scale measures on this many small batches (64 x 16 = 1,024 images at b = 16). */
const NOISE_BATCHES = 64;
/** At most this many rates are added past a grid's edge. */
const EXTEND = 2;
/** The label smoothing tried (Szegedy et al.'s 0.1, as in later large-batch work). */
const SMOOTHING = 0.1;
const log = (line: string) => process.stderr.write(line + '\n');
const pct = (x: number) => +(x * 100).toFixed(2);
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

function loaders(manifest: Manifest, dir: string) {
  const source = fileShardSource(dir);
  const make = (split: 'train' | 'val', augment: boolean) => new BatchLoader({
    manifest, source, decoder: nodeDecoder, split, augment: augment ? defaultAugment(manifest, split) : { kind: 'none' }, seed: SEED,
  });
  return { train: make('train', true), trainPlain: make('train', false), test: make('val', false) };
}

interface Searched { run: RunResult; val: number }

export async function main(args: string[]): Promise<void> {
  const num = (name: string): number | undefined => {
    const a = args.find((x) => x.startsWith(`--${name}=`));
    if (a === undefined) return undefined;
    const v = Number(a.slice(name.length + 3));
    if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number, got ${a}`);
    return v;
  };
  const base = args.includes('--quick') ? QUICK : FULL;
  const p: Profile = {
    ...base, warmupEpochs: num('warmup') ?? base.warmupEpochs, power: num('power') ?? base.power, epochs: num('epochs') ?? base.epochs,
    small: num('small') ?? base.small, large: num('large') ?? base.large, searchEpochs: num('search-epochs') ?? base.searchEpochs,
    larsSearchEpochs: num('lars-search-epochs') ?? base.larsSearchEpochs,
  };
  const named = new Args(args);
  const modelName = named.oneOf<ModelName>('model', CIFAR_MODELS, DEFAULT_MODEL);
  const biasTrust = named.oneOf<'layer' | 'global'>('lars-biases', ['layer', 'global'], 'layer');
  const wdArg = args.find((x) => x.startsWith('--lars-wd='));
  const larsWd = wdArg === undefined ? undefined : wdArg.length > '--lars-wd='.length ? Number(wdArg.slice('--lars-wd='.length)) : NaN;
  if (larsWd !== undefined && !(Number.isFinite(larsWd) && larsWd >= 0)) throw new Error(`--lars-wd must be a number >= 0 (LARS's weight decay), got ${wdArg}`);
  const noiseArg = args.find((x) => x === '--noise-scale' || x.startsWith('--noise-scale='));
  const noiseBatches = noiseArg === undefined ? 0 : noiseArg === '--noise-scale' ? NOISE_BATCHES : Number(noiseArg.slice('--noise-scale='.length));
  if (noiseArg !== undefined && !(Number.isInteger(noiseBatches) && noiseBatches >= 2)) {
    throw new Error(`--noise-scale=K needs a whole number K >= 2 of small batches to measure on, got ${noiseArg}`);
  }
  if (noiseBatches * p.small > p.trainSamples) {
    throw new Error(`--noise-scale=${noiseBatches}: ${noiseBatches} batches of ${p.small} exceed the ${p.trainSamples} training images`);
  }
  /** What every run shares unless it says otherwise: the schedule's power, LARS's bias rate and weight decay. */
  const defaults = (r: RunSpec): RunSpec => ({
    power: p.power, ...(r.kind === 'lars' ? { biasTrust } : {}), ...(r.kind === 'lars' && larsWd !== undefined ? { weightDecay: larsWd } : {}), ...r,
  });
  const otherBias = biasTrust === 'layer' ? 'global' : 'layer';
  const biasName = `biases at ${otherBias === 'global' ? 'the global rate' : "their layer's trust ratio"}`;
  const ratio = p.large / p.small;
  /** The schedule a variant tries instead: poly(1) against the default poly(2), else poly(2). */
  const otherPower = p.power === 1 ? 2 : 1;
  if (![p.epochs, p.searchEpochs, p.larsSearchEpochs].every(Number.isInteger)) {
    throw new Error('--epochs, --search-epochs and --lars-search-epochs must be whole numbers');
  }
  if (ratio < 16) log(`converge: warning: B/b = ${ratio}, the issue asks for at least 16x`);
  const manifest = await ensureDataset('cifar10');
  const dir = join(DEFAULT_CACHE_DIR, 'cifar10');
  const l = loaders(manifest, dir);
  const spec = modelByName(modelName, [manifest.image.channels, manifest.image.height, manifest.image.width], manifest.classes.length);
  const engine = await WasmEngine.create({ threads: 2 });
  const started = performance.now();
  log(`converge (${p.name}): cifar10 ${p.trainSamples} train / ${p.testSamples} test, ${spec.name}, ${p.epochs} epochs, b=${p.small}, B=${p.large} `
    + `(${ratio}x), ${p.warmupEpochs} warm-up epoch(s), poly(${p.power}), ${engine.info.description}`);

  // 1. The search: short runs on 45k, scored on the held-out 5k of the training split.
  const searchData: RunData = {
    train: l.train, trainSamples: p.searchTrain, evalLoader: l.trainPlain, evalIds: range(p.searchTrain, p.searchVal), everyEpoch: false,
  };
  const search: Searched[] = [];
  const trySearch = async (r: RunSpec): Promise<Searched> => {
    const run = await trainRun(engine, spec, searchData, defaults(r), SEED, log);
    const s = { run, val: run.final };
    search.push(s);
    return s;
  };
  const best = (xs: Searched[]): Searched => xs.reduce((a, b) => (b.val > a.val ? b : a));
  // A grid whose best rate sits on its edge is extended past that edge (halved or doubled, at
  // most EXTEND more rates) until the best is inside it.
  const searchRates = async (rates: number[], tryRate: (lr: number) => Promise<Searched>): Promise<Searched> => {
    const tries: Searched[] = [];
    for (const lr of rates) tries.push(await tryRate(lr));
    for (let i = 0; i < EXTEND; i++) {
      const next = pastEdge(tries.map((t) => ({ lr: t.run.lr, val: t.val, diverged: t.run.diverged })));
      if (next === null) break;
      tries.push(await tryRate(next));
    }
    return best(tries);
  };
  const le = p.larsSearchEpochs;
  log(`search: ${p.searchEpochs} epoch(s) for SGD, ${le} for LARS, on ${p.searchTrain}, `
    + `scored on training ids ${p.searchTrain}..${p.searchTrain + p.searchVal - 1}`);
  const givenSmall = num('small-lr');
  const givenLars = num('lars-lr');
  if ((givenSmall === undefined) !== (givenLars === undefined)) throw new Error('--small-lr and --lars-lr skip the search together: give both or neither');
  let smallLr = givenSmall ?? NaN;
  let larsLr = givenLars ?? NaN;
  const ablations: { name: string; val: number; delta: number }[] = [];
  const epochsGap: { epochs: number; sgd_small: number; lars_large: number; gap: number }[] = [];
  // The search runs: warm-up scaled with the run's length; a length other than the optimiser's
  // own search length is named.
  const sgdSearch = (lr: number, epochs = p.searchEpochs): RunSpec => (
    {
      name: `search sgd b=${p.small} lr ${lr}${epochs === p.searchEpochs ? '' : `, ${epochs} epochs`}`, batch: p.small, kind: 'sgd', lr, warmupEpochs: 0,
      epochs,
    });
  const larsSearch = (lr: number, epochs = le): RunSpec => (
    {
      name: `search lars B=${p.large} lr ${lr}${epochs === le ? '' : `, ${epochs} epochs`}`, batch: p.large, kind: 'lars', lr,
      warmupEpochs: p.warmupEpochs * (epochs / p.epochs), epochs,
    });
  if (givenSmall === undefined) {
    const smallBest = await searchRates(p.smallRates, (lr) => trySearch(sgdSearch(lr)));
    const larsBest = await searchRates(p.larsRates, (lr) => trySearch(larsSearch(lr)));
    smallLr = smallBest.run.lr;
    larsLr = larsBest.run.lr;
    // What moves LARS (at its search length, against larsBest): warm-up, bias/BN treatment,
    // label smoothing, the schedule's power. (No warm-up at all is left out to keep the bench
    // near 90 minutes: at B = 256 and 2 epochs it cost 7.1 points.)
    const chosen = larsSearch(larsLr);
    const variants: RunSpec[] = [
      { ...chosen, name: 'lars warm-up x2', warmupEpochs: 2 * chosen.warmupEpochs },
      { ...chosen, name: `lars ${biasName}`, biasTrust: otherBias },
      { ...chosen, name: `lars label smoothing ${SMOOTHING}`, smoothing: SMOOTHING },
      { ...chosen, name: `lars poly(${otherPower})`, power: otherPower },
    ];
    for (const v of variants) {
      const s = await trySearch(v);
      ablations.push({ name: v.name, val: pct(s.val), delta: +((s.val - larsBest.val) * 100).toFixed(2) });
    }
    // More epochs: LARS's gap to the small batch (both at their chosen rates) at SGD's and at
    // LARS's search length, each search run paired with the other optimiser at its length;
    // does the gap shrink as runs grow?
    if (p.searchEpochs !== le) {
      const pairs: [number, Searched, Searched][] = [
        [p.searchEpochs, smallBest, await trySearch(larsSearch(larsLr, p.searchEpochs))],
        [le, await trySearch(sgdSearch(smallLr, le)), larsBest],
      ];
      for (const [epochs, a, b] of pairs.sort((x, y) => x[0] - y[0])) {
        epochsGap.push({ epochs, sgd_small: pct(a.val), lars_large: pct(b.val), gap: +((a.val - b.val) * 100).toFixed(2) });
      }
      log(`search: LARS's gap to the small batch: ${epochsGap.map((g) => `${g.gap} pts at ${g.epochs} epochs`).join(', ')}`);
    }
  }
  log(`search: sgd_small lr ${smallLr}, sgd_large lr ${smallLr * ratio} (linear scaling), lars lr ${larsLr}`);

  // 2. The three runs at full length, evaluated on the test split after every epoch.
  const noise = noiseBatches > 0 ? { ids: range(0, noiseBatches * p.small), small: p.small } : undefined;
  const testData: RunData = {
    train: l.train, trainSamples: p.trainSamples, evalLoader: l.test, evalIds: range(0, p.testSamples), everyEpoch: true, ...(noise ? { noise } : {}),
  };
  const larsLarge: RunSpec = { name: 'lars_large', batch: p.large, kind: 'lars', lr: larsLr, warmupEpochs: p.warmupEpochs, epochs: p.epochs };
  const plan: RunSpec[] = [
    { name: 'sgd_small', batch: p.small, kind: 'sgd', lr: smallLr, warmupEpochs: 0, epochs: p.epochs },
    { name: 'sgd_large', batch: p.large, kind: 'sgd', lr: smallLr * ratio, warmupEpochs: p.warmupEpochs, epochs: p.epochs },
    larsLarge,
  ];
  if (args.includes('--ablate')) {
    plan.push(
      { ...larsLarge, name: 'lars_large warm-up x2', warmupEpochs: 2 * p.warmupEpochs },
      { ...larsLarge, name: 'lars_large biases adapted + decayed', adaptBias: true },
      { ...larsLarge, name: `lars_large ${biasName}`, biasTrust: otherBias },
      { ...larsLarge, name: `lars_large label smoothing ${SMOOTHING}`, smoothing: SMOOTHING },
      { ...larsLarge, name: `lars_large poly(${otherPower})`, power: otherPower },
      { ...larsLarge, name: 'lars_large 2x epochs', epochs: 2 * p.epochs },
    );
  }
  const only = args.find((a) => a.startsWith('--runs='))?.slice('--runs='.length).split(',');
  const unknown = only?.filter((n) => !plan.some((r) => r.name === n)) ?? [];
  if (unknown.length) throw new Error(`--runs: no run ${unknown.map((n) => `'${n}'`).join(', ')}; the runs are ${plan.map((r) => `'${r.name}'`).join(', ')}`);
  const runs: RunResult[] = [];
  for (const r of plan) if (!only || only.includes(r.name)) runs.push(await trainRun(engine, spec, testData, defaults(r), SEED, log));
  engine.destroy();

  const final = (name: string) => {
    const r = runs.find((x) => x.name === name);
    return r ? pct(r.final) : null;
  };
  const summary = {
    bench: 'converge', sgd_small: final('sgd_small'), sgd_large: final('sgd_large'), lars_large: final('lars_large'),
    dataset: 'cifar10', batch_small: p.small, batch_large: p.large, epochs: p.epochs,
  };
  const { sgd_small: small, sgd_large: large, lars_large: lars } = summary;
  const goals = { lars_holds: small !== null && lars !== null && lars >= small - 1, sgd_drops: small !== null && large !== null && large <= small - 3 };
  // The paper's regime: ResNet-20 (about 4x the small CNN's work per image) at b=128 vs
  // B=8K for ~90 epochs, from this run's measured speed; a GPU runs it at thousands of img/s.
  const speed = runs.reduce((a, r) => a + r.imagesPerSec, 0) / Math.max(1, runs.length);
  const paperHours = (3 * 90 * 50_000 * 4) / speed / 3600;
  const paperRegime = `ResNet-20 on CIFAR-10 at b=128 vs B=8192 for 90 epochs, three runs: about ${paperHours.toFixed(0)} h on this machine's wasm path `
    + `(${speed.toFixed(0)} img/s for the small CNN, ResNet-20 ~4x the work); a GPU at ~10k img/s: about ${((3 * 90 * 50_000) / 10_000 / 3600).toFixed(1)} h`;
  const out = only ? 'bench/results/converge-runs' : 'bench/results/converge';
  log(`converge: sgd_small ${small}%, sgd_large ${large}%, lars_large ${lars}%  goals ${JSON.stringify(goals)}  `
    + `(${((performance.now() - started) / 60000).toFixed(1)} min)`);
  writeFileEnsuringDir(`${out}.json`, JSON.stringify({
    profile: p, model: spec.name, engine: engine.info.description, minutes: (performance.now() - started) / 60000,
    search: search.map((s) => ({
      name: s.run.name, batch: s.run.batch, optimizer: s.run.kind, lr: s.run.lr, warmupEpochs: s.run.warmupEpochs, adaptBias: s.run.adaptBias ?? false,
      biasTrust: s.run.biasTrust ?? null, smoothing: s.run.smoothing ?? 0, power: s.run.power ?? 2, val_top1: pct(s.val), diverged: s.run.diverged,
      seconds: s.run.seconds,
    })),
    chosen: { sgd_small_lr: smallLr, sgd_large_lr: smallLr * ratio, lars_lr: larsLr }, ablations, epochsGap, runs, goals, paperRegime, summary,
  }, null, 2));
  writeFileEnsuringDir(`${out}.svg`, lineChartSvg({
    title: `CIFAR-10 ${spec.name}: test top-1 vs epoch (b=${p.small} SGD, B=${p.large} SGD / LARS)`, xLabel: 'epoch', yLabel: 'test top-1 (%)',
    series: runs.map((r) => ({ name: `${r.name} (lr ${+r.lr.toPrecision(3)})`, points: r.curve.map((c) => [c.epoch, c.top1 * 100] as [number, number]) })),
  }));
  console.log(JSON.stringify(summary));
}
