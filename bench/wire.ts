// `npm run bench -- wire`: what the all-reduce's number format does to training, at the default
// job's settings (`npm start`: the small CNN on CIFAR-10, B = 512, LARS at 12 with 2 warm-up
// epochs, poly(2), biases at their layer's trust ratio), on the wasm engine with both cores.
// Each run emulates `--peers` volunteers (default 4): every step's batch is cut into their
// slices, each slice's gradient computed on its own, and the slices summed by the real ring
// all-reduce over memory links in the wire format (src/protocol/codec.ts), the int8 wire with its
// per-peer error feedback, exactly as volunteers sum them; then the one LARS step. Every run
// sees the same images in the same order; only the wire differs.
//
//   npm run bench -- wire [--epochs E] [--peers 4] [--wires f32,i8] [--quick]
//
// --quick: 2 epochs on 4,096 training images, 1,000 test images (a smoke test). The default
// length is the default job's (DEFAULT_JOB.epochs, 11: about 7-16 minutes a run here); --epochs N runs shorter.
// Writes bench/results/wire.json and wire.svg (test top-1 per epoch) and prints as its LAST line
// {"bench":"wire","top1_f32":..,"top1_i8":..,"top1_gap_i8":..,"bytes_per_image_f32":..,
//  "bytes_per_image_bf16":..,"bytes_per_image_i8":..,"epochs":..,"peers":..} (top-1 in %, the
// gap f32 minus i8 in points; bytes each peer sends per image of its slice, frames included).
import { join } from 'node:path';
import { Args } from '../src/cli/args.ts';
import { DEFAULT_CACHE_DIR, ensureDataset } from '../coordinator/data/cli.ts';
import { DEFAULT_JOB } from '../coordinator/main.ts';
import { allReduceSentBytes } from '../src/comm/allreduce.ts';
import { WIRE_FORMATS, type WireFormat } from '../src/protocol/frames.ts';
import { fileShardSource } from '../src/data/node-source.ts';
import { nodeDecoder } from '../src/data/decode-node.ts';
import { BatchLoader, defaultAugment } from '../src/data/loader.ts';
import { Model } from '../src/nn/model.ts';
import { modelByName } from '../src/nn/models.ts';
import { WasmEngine } from '../src/wasm/engine.ts';
import { trainRun, type RunResult } from './converge-train.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { lineChartSvg } from './plot-lines.ts';

const SEED = 7;
const USAGE = `npm run bench -- wire [--epochs ${DEFAULT_JOB.epochs}] [--peers 4] [--wires f32,i8] [--quick]`;
const log = (line: string) => process.stderr.write(`${line}\n`);
const pct = (x: number) => +(x * 100).toFixed(2);

export async function main(args: string[]): Promise<void> {
  const a = new Args(args);
  const quick = a.flag('quick');
  const epochs = a.int('epochs', quick ? 2 : DEFAULT_JOB.epochs, 1);
  const peers = a.int('peers', 4, 2);
  const wires = a.str('wires', 'f32,i8').split(',').map((w) => {
    const f = WIRE_FORMATS.find((x) => x === w.trim());
    if (!f) throw new Error(`--wires takes formats from ${WIRE_FORMATS.join(', ')}, got "${w}"\n${USAGE}`);
    return f;
  });
  a.rejectUnknown(USAGE);
  const trainSamples = quick ? 4096 : 50_000;
  const testSamples = quick ? 1000 : 10_000;
  const batch = DEFAULT_JOB.batch;
  const manifest = await ensureDataset('cifar10');
  const source = fileShardSource(join(DEFAULT_CACHE_DIR, 'cifar10'));
  const loader = (split: 'train' | 'val', augment: boolean) =>
    new BatchLoader({ manifest, source, decoder: nodeDecoder, split, augment: augment ? defaultAugment(manifest, split) : { kind: 'none' }, seed: SEED });
  const train = loader('train', true);
  const test = loader('val', false);
  const spec = modelByName('small-cnn', [manifest.image.channels, manifest.image.height, manifest.image.width], manifest.classes.length);
  const engine = await WasmEngine.create({ threads: 2 });
  const paramFloats = (() => {
    const m = new Model(engine, spec, { seed: SEED });
    const n = m.layout.paramFloats;
    m.destroy();
    return n;
  })();
  const started = performance.now();
  log(`wire: ${spec.name} on cifar10 (${trainSamples} train / ${testSamples} test), B=${batch} as ${peers} emulated peers, `
    + `LARS lr ${DEFAULT_JOB.larsLr}, ${epochs} epochs, wires ${wires.join(', ')}; ${engine.info.description}`);
  const runs: { wire: WireFormat; run: RunResult }[] = [];
  for (const wire of wires) {
    const run = await trainRun(engine, spec, {
      train, trainSamples, evalLoader: test, evalIds: Array.from({ length: testSamples }, (_, i) => i), everyEpoch: true,
    }, {
      name: `${wire} wire`, batch, kind: 'lars', lr: DEFAULT_JOB.larsLr, epochs, power: 2, biasTrust: 'layer',
      // The default job's warm-up: 2 epochs, at most a fifth of the job (coordinator/main.ts defaultWarmup).
      warmupEpochs: Math.min(DEFAULT_JOB.larsWarmupEpochs, epochs / 5),
      ring: { peers, wire },
    }, SEED, log);
    log(`wire ${wire}: final top-1 ${pct(run.final)}% after ${epochs} epochs (${(run.seconds / 60).toFixed(1)} min)${run.diverged ? ', DIVERGED' : ''}`);
    runs.push({ wire, run });
  }
  // Bytes a peer sends per image of its slice (rank 0; the ring's peers send within a frame of each other).
  const perImage = (wire: WireFormat) => +(allReduceSentBytes(0, paramFloats, peers, wire) / (batch / peers)).toFixed(1);
  const top1 = Object.fromEntries(runs.map((r) => [`top1_${r.wire}`, pct(r.run.final)]));
  const f32 = runs.find((r) => r.wire === 'f32');
  const i8 = runs.find((r) => r.wire === 'i8');
  const summary = {
    bench: 'wire', ...top1,
    top1_gap_i8: f32 && i8 ? +((f32.run.final - i8.run.final) * 100).toFixed(2) : null,
    bytes_per_image_f32: perImage('f32'), bytes_per_image_bf16: perImage('bf16'), bytes_per_image_i8: perImage('i8'),
    epochs, peers, batch, model: spec.name, params: paramFloats, quick,
  };
  writeFileEnsuringDir(join('bench', 'results', 'wire.json'), JSON.stringify({
    summary, engine: engine.info.description, minutes: (performance.now() - started) / 60000,
    runs: runs.map((r) => ({ wire: r.wire, final: pct(r.run.final), diverged: r.run.diverged, seconds: r.run.seconds, curve: r.run.curve })),
  }, null, 2));
  writeFileEnsuringDir(join('bench', 'results', 'wire.svg'), lineChartSvg({
    title: `CIFAR-10 ${spec.name}, B=${batch} over ${peers} emulated peers: test top-1 per epoch by all-reduce wire`, xLabel: 'epoch', yLabel: 'test top-1 (%)',
    series: runs.map((r) => ({ name: `${r.wire} wire`, points: r.run.curve.map((c) => [c.epoch, c.top1 * 100] as [number, number]) })),
  }));
  engine.destroy();
  console.log(JSON.stringify(summary));
}
