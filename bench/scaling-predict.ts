// The scaling bench's predictions: the calibrated simulator (bench/scaling-sim.ts, -churn.ts)
// run for large rings of three models at two global batches over three kinds of link, for three
// systems, each labelled:
//   current  what the code does today (job defaults): buckets of 25 MiB all-reduced as backward
//            completes them, the last (the first layers') cut at 1 MiB (src/nn/buckets.ts,
//            src/client/sync-step.ts), work stealing on the steps where the coordinator measured
//            it faster (stealFraction auto: coordinator/steal-tuner.ts; each micro-batch assumed
//            to cost PREDICT_MICROBATCH_S on a real GPU), a flat ring below 16 peers and the
//            two-level collective from 16 (coordinator/two-level.ts), a lost peer costs its
//            slice (coordinator/slice-rerun.ts), bf16 frames (the wire of a job npm start
//            creates; the measured runs that fit the model send float32), the per-step overhead
//            fitted here;
//   planned  NOT built: the bucket cap chosen per model and link (the best of a few sizes), the
//            next assignment pipelined with the update (an assumed smaller per-step overhead,
//            PLANNED_OVERHEAD_S);
//   steal    current with work stealing on every step (npm start --steal
//            PREDICT_STEAL_FRACTION; coordinator/tail-pool.ts), its chunk the coordinator's own
//            rule (STEAL_CHUNK_MS of a peer's compute).
// All three assume the same stragglers (PREDICT_STRAGGLER); *_no_straggler keys show what they cost.
// Every number that is assumed rather than measured is named here and written to the JSON.
import { PROFILES, type Profile } from '../testbed/net/profiles.ts';
import { modelByName, type ModelName } from '../src/nn/models.ts';
import type { Calibration } from './scaling-calibrate.ts';
import { currentSystem } from './scaling-calibrate.ts';
import { simulateChurn, type ChurnModel } from './scaling-churn.ts';
import { modelProfile, trainFlops, type ModelProfile } from './scaling-profile.ts';
import { boundOf, efficiency, simulateStep, type ClusterModel, type SystemModel } from './scaling-sim.ts';

export const PREDICT_PEERS = [64, 256, 1024] as const;
export const PREDICT_BATCHES = [8192, 32_768] as const;

/** A link kind of the predictions: bandwidth of the slowest peer and one-way delay (software latency is added). */
export interface LinkKind { key: string; name: string; bytesPerS: number; oneWayS: number; source: string }
const fromProfile = (key: string, p: Profile): LinkKind => ({
  key, name: `${p.name} (testbed/net/profiles.ts)`, bytesPerS: Math.min(p.bound.upBytesPerS, p.bound.downBytesPerS), oneWayS: p.bound.oneWayMs / 1000,
  source: `testbed/net/profiles.ts ${p.name}: min(up, down) ${Math.min(p.bound.upBytesPerS, p.bound.downBytesPerS) / 1e6} MB/s per host, `
    + `${p.bound.oneWayMs} ms one way`,
});
export const LINK_KINDS: readonly LinkKind[] = [
  fromProfile('1g', PROFILES.lan),
  {
    key: '100m', name: '100 Mb/s per host', bytesPerS: 1e8 / 8, oneWayS: 0.001,
    source: 'assumed: 100 Mbit/s each way per host, 1 ms one way (no profile of the test bed has per-host 100 Mbit/s)',
  },
  fromProfile('home', PROFILES.home),
];

/** One real GPU per peer: ResNet-50 at 224x224 trains this many images/s; other sizes scale by FLOPs. */
export const GPU_RESNET50_224_IMAGES_PER_S = 250;
/** Assumed for real machines (the straggler fitted here is 2-core contention, see the JSON). */
export const PREDICT_STRAGGLER = 0.05;
/** Assumed spread of volunteers' speeds (lognormal sigma): slices follow speed, so it costs little. */
export const PREDICT_SPEED_SIGMA = 0.5;
/** The stealFraction of the `steal` system: three quarters of each slice in the tail, so that the final grants can be long enough to hide the all-reduce. */
export const PREDICT_STEAL_FRACTION = 0.75;
/** Assumed fixed cost of a micro-batch on a real GPU (kernel launches and a read-back; software WebGPU here: the straggler runs measure it). */
export const PREDICT_MICROBATCH_S = 0.005;
/** Assumed per-step overhead of the planned system (next assignment pipelined, update on the GPU). */
export const PLANNED_OVERHEAD_S = 0.01;
/** Bytes on the wire per float32 byte in a job npm start creates (bf16 frames, coordinator/main.ts START_WIRE). */
export const START_WIRE_SCALE = 0.5;
export const PLANNED_BUCKETS = [Infinity, 64e6, 25e6, 8e6, 2e6, 0.5e6] as const;
export const CHURN: ChurnModel = { meanSessionS: 1800, detectS: 2, joinS: 3, steps: 2000 };

export interface Scenario {
  key: string; model: ModelName; input: [number, number, number]; classes: number; profile: ModelProfile; imagesPerSecPerPeer: number; computeSource: string;
}

export function scenarios(cal: Calibration): Scenario[] {
  const r50 = (px: number): Scenario => {
    const profile = modelProfile(modelByName('resnet50', [3, px, px], 1000));
    const gpuFlops = GPU_RESNET50_224_IMAGES_PER_S * trainFlops(modelProfile(modelByName('resnet50', [3, 224, 224], 1000)));
    return {
      key: `resnet50-${px}`, model: 'resnet50', input: [3, px, px], classes: 1000, profile, imagesPerSecPerPeer: gpuFlops / trainFlops(profile),
      computeSource: `assumed: one real GPU per peer, ${GPU_RESNET50_224_IMAGES_PER_S} images/s on ResNet-50 at 224x224 `
        + `(${(gpuFlops / 1e12).toFixed(2)} TFLOP/s effective), scaled by this model's training FLOPs; not measured here`,
    };
  };
  return [
    {
      key: 'small-cnn', model: 'small-cnn', input: [1, 28, 28], classes: 10, profile: modelProfile(modelByName('small-cnn', [1, 28, 28], 10)),
      imagesPerSecPerPeer: cal.imagesPerSecPerPeer,
      computeSource: 'fitted here: one peer with this 2-core machine to itself, software WebGPU (Dawn, llvmpipe)',
    },
    r50(64), r50(224),
  ];
}

export type SystemKey = 'current' | 'planned' | 'steal';

/** Today's system on real machines: its micro-batches (work stealing) cost PREDICT_MICROBATCH_S. */
const predictedSystem = (cal: Calibration, wireScale: number): SystemModel => ({ ...currentSystem(cal, wireScale), microBatchS: PREDICT_MICROBATCH_S });

export function systems(cal: Calibration): Record<SystemKey, SystemModel> {
  return {
    current: predictedSystem(cal, START_WIRE_SCALE),
    steal: { ...predictedSystem(cal, START_WIRE_SCALE), steal: { fraction: PREDICT_STEAL_FRACTION } },
    planned: { ...predictedSystem(cal, START_WIRE_SCALE), bucketBytes: PLANNED_BUCKETS, overheadS: PLANNED_OVERHEAD_S, overheadPerPeerS: 0 },
  };
}

export function cluster(cal: Calibration, s: Scenario, link: LinkKind, peers: number): ClusterModel {
  return {
    peers, imagesPerSecPerPeer: s.imagesPerSecPerPeer, speedSigma: PREDICT_SPEED_SIGMA, stragglerMean: PREDICT_STRAGGLER, share: 1, seed: 11,
    link: { latencyS: link.oneWayS + cal.link.latencyS, bandwidthBytesPerS: link.bytesPerS },
  };
}

export interface PredictionRow {
  system: SystemKey;
  scenario: string; batch: number; link: string; peers: number; imagesPerPeer: number;
  stepS: number; computeS: number; exposedCommS: number; exposedLatencyS: number; exposedBandwidthS: number; allReduceS: number; overheadS: number;
  buckets: number; bucketBytes: number; steals: boolean;
  efficiency: number; efficiencyNoLatency: number; efficiencyNoStraggler: number; imagesPerSec: number;
  bound: string; boundShare: number;
  churn: { meanSessionS: number; efficiency: number; meanStepS: number; lossesPerStep: number };
}

export function predictRow(cal: Calibration, sys: SystemKey, s: Scenario, batch: number, link: LinkKind, peers: number): PredictionRow {
  const system = systems(cal)[sys];
  const c = cluster(cal, s, link, peers);
  const w = { batch, profile: s.profile };
  const t = simulateStep(c, system, w);
  const b = boundOf(t);
  const churn = simulateChurn(c, system, w, CHURN);
  return {
    system: sys, scenario: s.key, batch, link: link.key, peers, imagesPerPeer: batch / peers,
    stepS: t.totalS, computeS: t.computeS, exposedCommS: t.exposedCommS, exposedLatencyS: t.exposedLatencyS, exposedBandwidthS: t.exposedBandwidthS,
    allReduceS: t.allReduceS, overheadS: t.overheadS, buckets: t.buckets, bucketBytes: t.bucketBytes, steals: t.steals,
    efficiency: efficiency(c, system, w), efficiencyNoLatency: efficiency({ ...c, link: { ...c.link, latencyS: 0 } }, system, w),
    efficiencyNoStraggler: efficiency({ ...c, stragglerMean: 0 }, system, w), imagesPerSec: batch / t.totalS,
    bound: b.bound, boundShare: b.share,
    churn: { meanSessionS: CHURN.meanSessionS, efficiency: churn.efficiency, meanStepS: churn.meanStepS, lossesPerStep: churn.lossesPerStep },
  };
}

/** Today's system as it was with float32 frames (a job file without wire): what bf16 frames changed. */
export function float32Efficiency(cal: Calibration, scenarioKey: string, batch: number, linkKey: string, peers: number): number {
  const s = scenarios(cal).find((x) => x.key === scenarioKey);
  const link = LINK_KINDS.find((l) => l.key === linkKey);
  if (!s || !link) throw new Error(`no scenario ${scenarioKey} or link ${linkKey}`);
  return efficiency(cluster(cal, s, link, peers), predictedSystem(cal, 1), { batch, profile: s.profile });
}

export function predictAll(cal: Calibration): PredictionRow[] {
  const out: PredictionRow[] = [];
  for (const s of scenarios(cal)) for (const batch of PREDICT_BATCHES) for (const link of LINK_KINDS) for (const n of PREDICT_PEERS) {
    for (const sys of ['current', 'planned', 'steal'] as const) out.push(predictRow(cal, sys, s, batch, link, n));
  }
  return out;
}

/** "bandwidth: 81% of the step (2(N-1)/N S / bw = ...)": what bounds a row. */
export function boundText(r: PredictionRow): string {
  const ms = (s: number) => `${(s * 1000).toFixed(0)} ms`;
  return `${r.bound}: ${(100 * r.boundShare).toFixed(0)}% of the ${ms(r.stepS)} step (compute ${ms(r.computeS)} for ${r.imagesPerPeer} images per peer, `
    + `exposed all-reduce bandwidth ${ms(r.exposedBandwidthS)} + latency ${ms(r.exposedLatencyS)}, overhead ${ms(r.overheadS)})`;
}

/** What the headline (current system, ResNet-50 at 224x224, B = 32K, 1 Gb/s, `peers` peers) needs to reach `target` efficiency. */
export interface Needs {
  target: number;
  /** Per straggler mean (0 .. the assumed one): the largest software latency per ring message (ms) that reaches it; null: not even at 0 ms. */
  alphaMsByStraggler: { straggler: number; alphaMs: number | null }[];
  /** The efficiency with neither (0 software latency, no stragglers): what bandwidth and overhead leave. */
  noLatencyNoStraggler: number;
}

export const NEEDS_STRAGGLERS = [0, 0.01, 0.02, 0.03, PREDICT_STRAGGLER] as const;

/** The largest x in [0, hi] with ok(x), for ok true at 0 and monotone (bisection to 1e-4 of hi); null when not even ok(0). */
function largestOk(hi: number, ok: (x: number) => boolean): number | null {
  if (!ok(0)) return null;
  if (ok(hi)) return hi;
  let [lo, up] = [0, hi];
  while (up - lo > 1e-4 * hi) {
    const mid = (lo + up) / 2;
    if (ok(mid)) lo = mid;
    else up = mid;
  }
  return lo;
}

export function needsFor(cal: Calibration, target: number, peers = 64): Needs {
  const s = scenarios(cal).find((x) => x.key === 'resnet50-224')!;
  const link = LINK_KINDS.find((l) => l.key === '1g')!;
  const base = cluster(cal, s, link, peers);
  const w = { batch: 32_768, profile: s.profile };
  const sys = systems(cal).current;
  const eff = (alphaS: number, mu: number) => efficiency({ ...base, stragglerMean: mu, link: { ...base.link, latencyS: link.oneWayS + alphaS } }, sys, w);
  const alphaMsByStraggler = NEEDS_STRAGGLERS.map((mu) => {
    const a = largestOk(cal.link.latencyS, (x) => eff(x, mu) >= target);
    return { straggler: mu, alphaMs: a === null ? null : a * 1000 };
  });
  return { target, alphaMsByStraggler, noLatencyNoStraggler: eff(0, 0) };
}
