// The scaling bench's predictions: the calibrated simulator (bench/scaling-sim.ts, -churn.ts)
// run for large rings of three models at two global batches over four kinds of link, for three
// systems, each labelled:
//   current  what the code does today. The small CNN runs a default job: buckets of 25 MiB
//            all-reduced as backward completes them, the last (the first layers') cut at 1 MiB
//            (src/nn/buckets.ts, src/client/sync-step.ts), work stealing on the steps where
//            the coordinator measured it faster (stealFraction auto: coordinator/steal-tuner.ts;
//            each micro-batch assumed to cost PREDICT_MICROBATCH_S on a real GPU), a flat ring
//            below 16 peers and the two-level collective from 16 (coordinator/two-level.ts), a
//            lost peer costs its slice (coordinator/slice-rerun.ts), bf16 frames (the wire of a
//            job npm start creates; the measured runs that fit the model send float32), the
//            per-step overhead fitted here. ResNet-50 runs as an ImageNet job runs: shard-local
//            sampling, so never stealing; each slice in micro-batches that fit the GPU budget
//            (src/nn/fit.ts's rule, whole BN groups of the recipe), only the last of them
//            overlapping the all-reduce; and each peer's host update of 25.6M parameters
//            (measured here, bench/scaling-update.ts) on top of the fitted overhead;
//   planned  NOT built: the bucket cap chosen per model and link (the best of a few sizes), the
//            next assignment pipelined with the update on the GPU (an assumed smaller per-step
//            overhead, PLANNED_OVERHEAD_S);
//   steal    current with work stealing on every step (npm start --steal
//            PREDICT_STEAL_FRACTION; coordinator/tail-pool.ts), its chunk the coordinator's own
//            rule (STEAL_CHUNK_MS of a peer's compute); for ResNet-50 the same as current (an
//            ImageNet job's shard-local sampling never steals).
// All three assume the same stragglers (PREDICT_STRAGGLER); *_no_straggler keys show what they cost.
// The 1 Gbit/s links are the transport bench's measured ones (linkKinds). Every input is listed
// with its status, measured, fitted, assumed or code, in bench/scaling-table.ts and the JSON.
import { PROFILES, type Profile } from '../testbed/net/profiles.ts';
import { ringLinkRate, type InputStatus, type TransportFigures } from './scaling-inputs.ts';
import { DEFAULT_GPU_BUDGET, FOOTPRINT_MARGIN, RESERVE_SHARE } from '../src/nn/fit.ts';
import { modelByName, type ModelName } from '../src/nn/models.ts';
import type { Calibration } from './scaling-calibrate.ts';
import { currentSystem } from './scaling-calibrate.ts';
import { simulateChurn, type ChurnModel } from './scaling-churn.ts';
import { modelProfile, trainFlops, type ModelProfile } from './scaling-profile.ts';
import { IMAGENET_RECIPES, recipeBnGroup } from '../coordinator/recipes.ts';
import { boundOf, efficiency, simulateStep, type ClusterModel, type SystemModel } from './scaling-sim.ts';

export const PREDICT_PEERS = [64, 256, 1024] as const;
export const PREDICT_BATCHES = [8192, 32_768] as const;

/** A link kind of the predictions: bandwidth of the slowest peer and one-way delay (software latency is added). */
export interface LinkKind { key: string; name: string; bytesPerS: number; oneWayS: number; status: InputStatus; source: string }
const lineOf = (p: Profile) => Math.min(p.bound.upBytesPerS, p.bound.downBytesPerS);

/**
 * The links the predictions run on. `1g`: the lan profile's 1 Gbit/s line as Node volunteers'
 * direct links carry it in a ring (the transport bench's measured one-way rate, capped by its
 * measured CPU per byte sent and received: scaling-inputs.ts ringLinkRate); `1g-page`: the same
 * line between donor pages (Chromium's channel, CPU-bound well below the line). Without a
 * recorded transport run both fall back to the line's nominal rate, marked assumed.
 */
export function linkKinds(t: TransportFigures | null): LinkKind[] {
  const lan = PROFILES.lan, home = PROFILES.home;
  const nominal = (key: string, name: string): LinkKind => ({
    key, name, bytesPerS: lineOf(lan), oneWayS: lan.bound.oneWayMs / 1000, status: 'assumed',
    source: `the lan profile's nominal ${lineOf(lan) / 1e6} MB/s (no transport run recorded in docs/results/transport.json: no CPU cost counted)`,
  });
  const measured = (key: string, name: string, mbps: number, recv: number, send: number, what: string): LinkKind => {
    const rate = Math.min(lineOf(lan), ringLinkRate(mbps, recv, send));
    return {
      key, name, bytesPerS: rate, oneWayS: lan.bound.oneWayMs / 1000, status: 'measured',
      source: `npm run bench -- transport (${t!.file}, ${t!.date.slice(0, 10)}): ${what} ${mbps} MB/s one way on the 1 Gbit/s line, `
        + `${(recv + send).toFixed(2)} CPU-s per GB sent and received: ${(rate / 1e6).toFixed(1)} MB/s each way in a ring`,
    };
  };
  return [
    t ? measured('1g', '1 Gbit/s LAN, Node volunteers (direct links)', t.nodeMBps, t.nodeCpuSPerGb, t.nodeSendCpuSPerGb, "a Node volunteers' direct link")
      : nominal('1g', '1 Gbit/s LAN (nominal)'),
    t ? measured('1g-page', '1 Gbit/s LAN, donor pages (WebRTC in Chromium)', t.pageMBps, t.pageCpuSPerGb, t.pageSendCpuSPerGb, "a donor page's link")
      : nominal('1g-page', '1 Gbit/s LAN, donor pages (nominal)'),
    {
      key: '100m', name: '100 Mb/s per host', bytesPerS: 1e8 / 8, oneWayS: 0.001, status: 'assumed',
      source: 'assumed: 100 Mbit/s each way per host, 1 ms one way (no profile of the test bed has per-host 100 Mbit/s)',
    },
    {
      key: 'home', name: `${home.name} (testbed/net/profiles.ts)`, bytesPerS: lineOf(home), oneWayS: home.bound.oneWayMs / 1000, status: 'assumed',
      source: `the test bed's home profile, nominal: min(up, down) ${lineOf(home) / 1e6} MB/s per host, ${home.bound.oneWayMs} ms one way `
        + '(npm run bench -- network measures a ring all-reduce on it against this bound: efficiency_home)',
    },
  ];
}

/** The links with no transport run: nominal line rates. */
export const NOMINAL_LINKS: readonly LinkKind[] = linkKinds(null);

/** What the predictions take from measurements beyond the calibration: the links, and each model's host update. */
export interface PredictInputs {
  links: readonly LinkKind[];
  /** Seconds of one peer's host LARS step + weight checksum, per model (bench/scaling-update.ts); absent: not measured, none added. */
  hostUpdateS?: { small: number; resnet50: number };
}
export const NOMINAL_INPUTS: PredictInputs = { links: NOMINAL_LINKS };

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
  /** An ImageNet job's options (coordinator/main.ts, recipes.ts): shard-local sampling (so no work stealing), BN groups, micro-batches that fit. */
  imagenet: boolean;
  /** The most images a peer computes at once (src/nn/fit.ts with the scenario's GPU budget); absent: the whole slice. */
  microBatchImages?: number;
  microBatchSource?: string;
  /** Seconds of per-peer work per step beyond the small CNN's that the fit holds: the host update of a larger model (measured). */
  extraOverheadPerPeerS: number;
  overheadSource: string;
}

/** Bytes one more image costs ResNet-50 on the WebGPU engine, by image side (`npm run bench -- fit`, 2026-11-28: docs/imagenet.md). */
export const RESNET50_IMAGE_BYTES: Readonly<Record<number, number>> = { 64: 93.9 * 2 ** 20, 224: 329.0 * 2 ** 20 };
/** What the device holds besides the batch: the weights, the gradient and the micro-batches' sum (float32). Assumed. */
export const HELD_PER_PARAM_BYTES = 12;
/** A lab volunteer that says its GPU's memory (--memory-mb 16384): the second budget the headline shows. */
export const LAB_GPU_BUDGET = 16 * 2 ** 30;
/** Assumed: a real GPU reads the gradient back and takes the weights up at this rate (bytes/s) each way; not measured (issue 42). */
export const PREDICT_GPU_COPY_BYTES_PER_S = 5e9;

/** src/nn/fit.ts fitMicroBatch's rule for a device of `budget` bytes: whole BN groups of `group` that fit beside the model. */
export function fitImages(perImageBytes: number, paramCount: number, budget: number, group: number): number {
  const free = budget * (1 - RESERVE_SHARE) - HELD_PER_PARAM_BYTES * paramCount;
  return Math.max(group, Math.floor(Math.floor(free / (perImageBytes * FOOTPRINT_MARGIN)) / group) * group);
}

export function scenarios(cal: Calibration, inp: PredictInputs = NOMINAL_INPUTS, gpuBudget = DEFAULT_GPU_BUDGET): Scenario[] {
  const r50 = (px: number): Scenario => {
    const profile = modelProfile(modelByName('resnet50', [3, px, px], 1000));
    const gpuFlops = GPU_RESNET50_224_IMAGES_PER_S * trainFlops(modelProfile(modelByName('resnet50', [3, 224, 224], 1000)));
    const group = recipeBnGroup(IMAGENET_RECIPES.resnet50, px) ?? 1;
    const microBatchImages = fitImages(RESNET50_IMAGE_BYTES[px]!, profile.paramCount, gpuBudget, group);
    const copyS = (2 * profile.gradBytes) / PREDICT_GPU_COPY_BYTES_PER_S;
    const hostS = inp.hostUpdateS ? Math.max(0, inp.hostUpdateS.resnet50 - inp.hostUpdateS.small) : 0;
    return {
      key: `resnet50-${px}`, model: 'resnet50', input: [3, px, px], classes: 1000, profile, imagesPerSecPerPeer: gpuFlops / trainFlops(profile),
      computeSource: `assumed: one real GPU per peer, ${GPU_RESNET50_224_IMAGES_PER_S} images/s on ResNet-50 at 224x224 `
        + `(${(gpuFlops / 1e12).toFixed(2)} TFLOP/s effective), scaled by this model's training FLOPs; not measured here`,
      imagenet: true, microBatchImages,
      microBatchSource: `src/nn/fit.ts's rule: a ${gpuBudget / 2 ** 30} GiB GPU budget (${gpuBudget === DEFAULT_GPU_BUDGET
        ? "the code's default when the browser does not say"
        : 'a volunteer started with --memory-mb'}), less ${HELD_PER_PARAM_BYTES} bytes a parameter held (assumed), `
        + `${RESNET50_IMAGE_BYTES[px]! / 2 ** 20} MiB an image (measured on WebGPU: npm run bench -- fit) x ${FOOTPRINT_MARGIN}, `
        + `in whole BN groups of ${group} `
        + `(the recipe's): ${microBatchImages} images at once`,
      extraOverheadPerPeerS: hostS + copyS,
      overheadSource: `${inp.hostUpdateS
        ? `measured here (bench/scaling-update.ts): the host LARS step and weight checksum of ${profile.paramCount} parameters, `
          + `${inp.hostUpdateS.resnet50.toFixed(3)} s, beyond the small CNN's ${inp.hostUpdateS.small.toFixed(3)} s that the fitted overhead holds`
        : 'the host update beyond the small CNN\'s: not measured (none added)'}; `
        + `plus the gradient read back and the weights written (${(2 * profile.gradBytes / 1e6).toFixed(0)} MB) at an assumed `
        + `${PREDICT_GPU_COPY_BYTES_PER_S / 1e9} GB/s: ${(copyS * 1000).toFixed(0)} ms`,
    };
  };
  return [
    {
      key: 'small-cnn', model: 'small-cnn', input: [1, 28, 28], classes: 10, profile: modelProfile(modelByName('small-cnn', [1, 28, 28], 10)),
      imagesPerSecPerPeer: cal.imagesPerSecPerPeer,
      computeSource: 'fitted here: one peer with this 2-core machine to itself, software WebGPU (Dawn, llvmpipe)',
      imagenet: false, extraOverheadPerPeerS: 0, overheadSource: 'fitted here (the small CNN\'s own update and checksum are in it)',
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

/**
 * A system as it runs a scenario's job. An ImageNet job (shard-local sampling) never steals, so
 * its `steal` system is its `current` one; it computes its slice in micro-batches that fit, and
 * its peers update a larger model on the host. The planned system updates on the GPU (its
 * overhead is assumed whole) and still computes in micro-batches without stealing.
 */
export function systemFor(cal: Calibration, sys: SystemKey, s: Scenario, wireScale = START_WIRE_SCALE): SystemModel {
  const base = { ...systems(cal)[sys], wireScale };
  if (!s.imagenet) return base;
  const micro = { microBatchImages: s.microBatchImages, steal: undefined };
  if (sys === 'planned') return { ...base, ...micro };
  return { ...systems(cal).current, wireScale, ...micro, overheadPerPeerS: base.overheadPerPeerS + s.extraOverheadPerPeerS };
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
  const system = systemFor(cal, sys, s);
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

/** Bytes on the wire per float32 byte of each wire format (frames' headers aside): what `wireEfficiency` takes. */
export const WIRE_SCALES = { f32: 1, bf16: 0.5, i8: 0.25 } as const;

/** Today's system with another wire format (a job file's `wire`): what bf16 frames changed, or what int8 would buy. */
export function wireEfficiency(
  cal: Calibration, scenarioKey: string, batch: number, linkKey: string, peers: number, inp: PredictInputs, wireScale: number,
): number {
  const s = scenarios(cal, inp).find((x) => x.key === scenarioKey);
  const link = inp.links.find((l) => l.key === linkKey);
  if (!s || !link) throw new Error(`no scenario ${scenarioKey} or link ${linkKey}`);
  return efficiency(cluster(cal, s, link, peers), systemFor(cal, 'current', s, wireScale), { batch, profile: s.profile });
}

export function predictAll(cal: Calibration, inp: PredictInputs = NOMINAL_INPUTS): PredictionRow[] {
  const out: PredictionRow[] = [];
  for (const s of scenarios(cal, inp)) for (const batch of PREDICT_BATCHES) for (const link of inp.links) for (const n of PREDICT_PEERS) {
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

export function needsFor(cal: Calibration, target: number, peers = 64, inp: PredictInputs = NOMINAL_INPUTS): Needs {
  const s = scenarios(cal, inp).find((x) => x.key === 'resnet50-224')!;
  const link = inp.links.find((l) => l.key === '1g')!;
  const base = cluster(cal, s, link, peers);
  const w = { batch: 32_768, profile: s.profile };
  const sys = systemFor(cal, 'current', s);
  const eff = (alphaS: number, mu: number) => efficiency({ ...base, stragglerMean: mu, link: { ...base.link, latencyS: link.oneWayS + alphaS } }, sys, w);
  const alphaMsByStraggler = NEEDS_STRAGGLERS.map((mu) => {
    const a = largestOk(cal.link.latencyS, (x) => eff(x, mu) >= target);
    return { straggler: mu, alphaMs: a === null ? null : a * 1000 };
  });
  return { target, alphaMsByStraggler, noLatencyNoStraggler: eff(0, 0) };
}
