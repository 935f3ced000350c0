// One training run of the converge benchmark on any engine (the wasm engine here: the path
// every CPU volunteer trains with). Same step as a volunteer's: forward + loss + backward on
// the engine, the gradient read back, the ONE host optimiser step (src/optim/host.ts) through
// TrainingState, the weights written back. A run stops early when its loss stops being finite.
import type { Engine, TensorLike } from '../src/backend/engine.ts';
import { TrainingState } from '../src/client/state.ts';
import type { BatchLoader } from '../src/data/loader.ts';
import type { ModelSpec } from '../src/nn/graph.ts';
import { Model } from '../src/nn/model.ts';
import { parseOptimizerConfig } from '../src/optim/index.ts';
import { evaluate } from '../src/train/evaluate.ts';
import { stepSamples, stepsPerEpoch } from '../src/train/sampler.ts';
import { recordGradients, uploadBatch } from '../src/train/step.ts';
import { measureNoiseScale, type NoiseScale } from './noise-scale.ts';
import { allReduceSum, memoryRing, type WireFormat } from '../src/comm/index.ts';
import { chunkRange } from '../src/comm/plan.ts';

export interface RunSpec {
  name: string;
  batch: number;
  kind: 'sgd' | 'lars';
  lr: number;
  warmupEpochs: number;
  epochs: number;
  /** LARS adaptation and weight decay also for biases (and BN gamma/beta); default off. */
  adaptBias?: boolean;
  /** LARS: biases (not adapted themselves) step at their layer weight's trust ratio, not the global rate (src/nn/layout.ts biasTrust). */
  biasTrust?: 'global' | 'layer';
  /** Label smoothing of the training loss (default 0; evaluations use plain labels). */
  smoothing?: number;
  /** The poly schedule's power (default 2, the paper's poly(2)). */
  power?: number;
  /** Weight decay (default: the optimiser's, 5e-4). */
  weightDecay?: number;
  /**
   * Emulated peers (bench/wire.ts): each step's batch is cut into `peers` slices, each slice's
   * gradient computed on its own and the slices summed by the real ring all-reduce over memory
   * links in the `wire` format (src/comm), with the int8 wire's error feedback per peer, as
   * volunteers do. Absent: one gradient of the whole batch.
   */
  ring?: { peers: number; wire: WireFormat };
}

export interface RunData {
  train: BatchLoader;
  /** Training ids are [0, trainSamples). */
  trainSamples: number;
  evalLoader: BatchLoader;
  evalIds: readonly number[];
  /** Evaluate after every epoch (the final runs) or only at the end (the search). */
  everyEpoch: boolean;
  /** Also measure the gradient noise scale at each evaluation, on these training ids in batches of `small` (bench/noise-scale.ts). */
  noise?: { ids: readonly number[]; small: number };
}

export interface CurvePoint { epoch: number; top1: number; loss: number; trainLoss: number; seconds: number; noise?: NoiseScale }

export interface RunResult extends RunSpec {
  steps: number;
  curve: CurvePoint[];
  /** Top-1 (fraction) of the last evaluation. */
  final: number;
  diverged: boolean;
  seconds: number;
  imagesPerSec: number;
}

export async function trainRun<T extends TensorLike>(
  engine: Engine<T>, spec: ModelSpec, data: RunData, r: RunSpec, seed: number, log: (line: string) => void,
): Promise<RunResult> {
  const spe = stepsPerEpoch(data.trainSamples, r.batch);
  const steps = spe * r.epochs;
  const model = new Model(engine, spec, {
    seed, layout: { adaptBiasAndBn: r.adaptBias ?? false, decayBiasAndBn: r.adaptBias ?? false, biasTrust: r.biasTrust ?? 'global' },
  });
  const config = parseOptimizerConfig({
    kind: r.kind, lr: r.lr, totalSteps: steps, warmupSteps: Math.min(Math.round(r.warmupEpochs * spe), steps - 1), power: r.power, weightDecay: r.weightDecay,
  });
  const state = new TrainingState(model, config);
  state.reset(seed);
  const t0 = performance.now();
  const curve: CurvePoint[] = [];
  const load = (s: number) => {
    const { epoch, ids } = stepSamples(seed, s, r.batch, data.trainSamples);
    return data.train.load(ids, epoch);
  };
  let x: T | null = null;
  let diverged = false;
  let lossSum = 0;
  let lossN = 0;
  // Emulated peers load each slice in turn; one gradient of the whole batch loads the next batch ahead.
  let pending = r.ring ? null : load(0);
  /** Milliseconds spent measuring the noise scale: not the run's time. */
  let measuring = 0;
  let s = 0;
  const peers = r.ring ? emulatedPeers(r.ring.peers, r.ring.wire, model.layout.paramFloats) : null;
  try {
    for (; s < steps; s++) {
      let G: Float32Array;
      let lossTotal: number;
      if (peers) {
        const { epoch, ids } = stepSamples(seed, s, r.batch, data.trainSamples);
        const slices: Float32Array[] = [];
        lossTotal = 0;
        for (let k = 0; k < peers.n; k++) {
          const [a, b] = chunkRange(k, ids.length, peers.n);
          const xs = uploadBatch(model, await data.train.load(ids.slice(a, b), epoch), null);
          const total = recordGradients(model, xs, seed * 1_000_003 + s, r.smoothing ?? 0);
          slices.push(await engine.readF32(model.grads));
          lossTotal += (await engine.readF32(total))[0]!;
          engine.release(xs);
        }
        G = await peers.sum(slices, s);
      } else {
        const batch = await (pending ?? load(s));
        x = uploadBatch(model, batch, x);
        const total = recordGradients(model, x, seed * 1_000_003 + s, r.smoothing ?? 0);
        G = await engine.readF32(model.grads);
        pending = s + 1 < steps ? load(s + 1) : null;
        lossTotal = (await engine.readF32(total))[0]!;
      }
      state.applyUpdate(G, s, r.batch);
      const loss = lossTotal / r.batch;
      if (!Number.isFinite(loss)) { diverged = true; log(`  ${r.name}: loss ${loss} at step ${s + 1}: diverged, stopping`); s++; break; }
      lossSum += loss;
      lossN++;
      const endOfEpoch = (s + 1) % spe === 0;
      if (endOfEpoch && (data.everyEpoch || s + 1 === steps)) {
        const e = await evaluate(model, data.evalLoader, data.evalIds, 250);
        const seconds = (performance.now() - t0 - measuring) / 1000;
        const epoch = (s + 1) / spe;
        const m0 = performance.now();
        const noise = data.noise ? await measureNoiseScale(engine, model, data.train, data.noise.ids, data.noise.small, epoch - 1, seed * 7919 + s) : undefined;
        measuring += performance.now() - m0;
        curve.push({ epoch, top1: e.top1, loss: e.loss, trainLoss: lossSum / lossN, seconds, ...(noise ? { noise } : {}) });
        const noiseText = noise ? `  B_simple ${noise.bSimple === null ? 'n/a' : noise.bSimple.toFixed(0)}` : '';
        log(`  ${r.name} epoch ${epoch}: top-1 ${(e.top1 * 100).toFixed(2)}%  test loss ${e.loss.toFixed(3)}  `
          + `train loss ${(lossSum / lossN).toFixed(3)}${noiseText}  (${seconds.toFixed(0)} s)`);
        lossSum = 0;
        lossN = 0;
      }
    }
    if (diverged) {
      const e = await evaluate(model, data.evalLoader, data.evalIds, 250);
      curve.push({
        epoch: s / spe, top1: Number.isFinite(e.loss) ? e.top1 : 1 / spec.classes, loss: e.loss, trainLoss: NaN,
        seconds: (performance.now() - t0 - measuring) / 1000,
      });
    }
  } finally {
    peers?.close();
    if (x) engine.release(x);
    state.destroy();
    model.destroy();
  }
  const seconds = (performance.now() - t0 - measuring) / 1000;
  return { ...r, steps: s, curve, final: curve[curve.length - 1]?.top1 ?? NaN, diverged, seconds, imagesPerSec: (s * r.batch) / seconds };
}

/**
 * `n` peers' slices summed as a ring of volunteers sums them: allReduceSum over memory links in
 * `wire`, each peer adding what its sends dropped in the last step (error feedback) on a lossy
 * wire. Every peer ends with the same bits; peer 0's sum is returned.
 */
function emulatedPeers(n: number, wire: WireFormat, length: number) {
  const ids = Array.from({ length: n }, (_, i) => `peer${i}`);
  const { rings } = memoryRing(ids);
  const feedback = wire === 'i8';
  let carry: Float32Array[] = ids.map(() => new Float32Array(length));
  return {
    n,
    async sum(slices: Float32Array[], step: number): Promise<Float32Array> {
      const fresh = ids.map(() => new Float32Array(length));
      if (feedback) slices.forEach((g, i) => { for (let j = 0; j < length; j++) g[j] = g[j]! + carry[i]![j]!; });
      await Promise.all(rings.map((ring, i) => allReduceSum(slices[i]!, { ring, step, wire, ...(feedback ? { feedback: fresh[i]! } : {}) })));
      carry = fresh;
      return slices[0]!;
    },
    close: () => { for (const ring of rings) ring.close(); },
  };
}
