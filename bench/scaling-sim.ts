// The scaling simulator: the time of one synchronous data-parallel step on N volunteers, and
// the time per committed step when volunteers come and go. Pure functions (seeded where random).
//
// Compute. Peer i has speed c_i (images/s, a machine to itself; lognormal around the mean c
// with sigma `speedSigma`, scaled so the ring's total is exactly N c) and gets the slice
// b_i = B c_i / sum c (src/client: slices follow measured throughput), so every peer needs
// t = B / (N c share) for its slice. Each step each peer is slowed by an independent
// exponential factor of mean mu (a straggler: GC, the OS, a shared GPU); the step waits for the
// slowest, whose expected time is t (1 + mu H_N) (H_N the N-th harmonic number: the expected
// maximum of N exponentials). Backward is the last `backwardShare` of it.
// Communication. The gradient (S bytes) goes in buckets in reverse layer order
// (bench/scaling-collective.ts); with overlap each bucket's all-reduce starts when backward has
// completed it, else all start after backward; the bucket all-reduced last (the first layers')
// is cut small (lastBucketBytes), as it is all exposed. Only what
// runs past the end of backward costs: the exposed communication.
// A slice larger than what fits the device (microBatchImages) goes as k micro-batches: compute
// gains (k - 1) microBatchS, and only the last micro-batch's backward overlaps the all-reduce.
// Step: T = t (1 + mu H_N) + exposed + o, o = overheadS + overheadPerPeerS / share (the
// coordinator round trip and barrier, and each peer's update and checksum, which peers sharing
// one machine pay share^-1 times).
// Work stealing (a job's stealFraction f, coordinator/tail-pool.ts): each peer computes its fixed
// part (1 - f of its slice), then chunks of the step's tail as it claims them, then its final
// grant, sized to its rate in the step, with the all-reduce overlapped. The step's compute is
// then the fluid time t / E[1 / s] (every peer busy until the tail is done; s = 1 + the
// straggler factor) unless the slowest fixed part is longer, (1 - f) t (1 + mu H_N), plus one
// chunk tau (members end within about a chunk of each other) and, per chunk (those claimed while
// the slowest fixed part runs), the claim round trip (two link latencies) not hidden behind a
// chunk's compute, and the fixed cost of each micro-batch past the first (microBatchS). The
// backward that overlaps the all-reduce is the final grant's: a window
// W = max(2 x the all-reduce, 3/4 of the compute) (the coordinator's rule), at most the tail f t,
// not the whole backward.
// Efficiency: throughput(N) / sum_i throughput_i(alone), alone = one peer, no all-reduce:
// T1_i = B (1 + mu) / c_i + o. For identical peers this is T(1) / (N T(N)); it is <= 1.
import { makeRng } from '../src/rng.ts';
import { allReduceTime, bucketsOf, exposedCommS, type LinkModel, type Topology } from './scaling-collective.ts';
import type { ModelProfile } from './scaling-profile.ts';
import { WINDOW_COMM_FACTOR, WINDOW_COMPUTE_SHARE, autoChunk, type StealSettings } from '../coordinator/tail-pool.ts';
import { AUTO_MAX_INTERVAL, AUTO_PROBE } from '../coordinator/steal-tuner.ts';

export interface ClusterModel {
  peers: number;
  /** c: mean images/s of one peer with a machine to itself. */
  imagesPerSecPerPeer: number;
  /** Lognormal sigma of the per-peer speeds (0: identical peers). */
  speedSigma: number;
  /** mu: mean of the exponential per-step slowdown of each peer (0: no stragglers). */
  stragglerMean: number;
  /** The share of a machine each peer has: 1 on machines of their own, 1/N for N on one machine. */
  share: number;
  link: LinkModel;
  /** Seeds the per-peer speeds (and the churn draws). */
  seed: number;
}

export interface SystemModel {
  topology: Topology;
  overlap: boolean;
  /** Bucket sizes in bytes the system may use; the best for each step is taken (a tuned bucket cap). Infinity: one all-reduce. */
  bucketBytes: readonly number[];
  /** The cap of the bucket all-reduced last (the job's lastBucketBytes, src/nn/buckets.ts); absent or 0: no such cut. */
  lastBucketBytes?: number;
  /** What a peer lost mid-step costs: the whole step ('abort', today) or its slice ('rerun-slice', planned). */
  onLoss: 'abort' | 'rerun-slice';
  /** Seconds per step outside compute and all-reduce independent of the share (coordinator, barrier). */
  overheadS: number;
  /** Seconds per step of each peer's own work outside compute and all-reduce (update, checksum), at share 1. */
  overheadPerPeerS: number;
  /** With topology 'two-level': the ring size from which it is used (a smaller ring is flat, as the job's twoLevelFrom); absent: always. */
  twoLevelFrom?: number;
  /** Bytes on the wire per byte of float32 gradient: 1 (float32 frames, today's default), 0.5 (half precision); absent: 1. */
  wireScale?: number;
  /**
   * Work stealing at the step's end (the job's stealFraction and stealChunk); absent: none. auto
   * (the default job): the faster way of each step, plus the tuner's probes of the other way
   * (coordinator/steal-tuner.ts: AUTO_PROBE steps of the other way in every AUTO_MAX_INTERVAL + 2 AUTO_PROBE once one way keeps winning).
   */
  steal?: StealSettings & { auto?: boolean };
  /** Seconds each micro-batch beyond a step's first costs (a read-back, small kernels, buffers for another batch size), at share 1; absent: 0. */
  microBatchS?: number;
  /**
   * The most images a peer computes at once (what fits its device: src/nn/fit.ts); absent: its
   * whole slice in one batch. A larger slice goes as micro-batches whose gradients are summed on
   * the engine: each past the first costs microBatchS, and only the last one's backward overlaps
   * the all-reduce (src/client/sync-step.ts). Work stealing (which cuts slices its own way) ignores it.
   */
  microBatchImages?: number;
}

/** The topology a system uses for a ring of `peers` (flat below its twoLevelFrom). */
export const topologyFor = (s: SystemModel, peers: number): SystemModel['topology'] =>
  s.topology === 'two-level' && peers < (s.twoLevelFrom ?? 0) ? 'ring' : s.topology;

export type Workload = { batch: number; profile: Pick<ModelProfile, 'gradBytes' | 'backwardShare' | 'layers'> };

export interface StepBreakdown {
  /** The slowest peer's forward + backward. */
  computeS: number;
  backwardS: number;
  /** One all-reduce of the whole gradient, not overlapped (what a step redoes after a loss). */
  allReduceS: number;
  /** Communication after backward ends, and its latency and bandwidth parts (pro rata). */
  exposedCommS: number;
  exposedLatencyS: number;
  exposedBandwidthS: number;
  overheadS: number;
  totalS: number;
  buckets: number;
  bucketBytes: number;
  /** Whether the step steals (a system with steal auto: the faster way). */
  steals: boolean;
}

export function harmonic(n: number): number {
  let h = 0;
  for (let k = 1; k <= n; k++) h += 1 / k;
  return h;
}

/** Per-peer speeds: lognormal(0, sigma) draws scaled so that their mean is exactly c. */
export function peerSpeeds(c: ClusterModel): number[] {
  const rng = makeRng(c.seed);
  const raw = Array.from({ length: c.peers }, () => Math.exp(c.speedSigma * rng.normal()));
  const mean = raw.reduce((a, b) => a + b, 0) / raw.length;
  return raw.map((r) => (r / mean) * c.imagesPerSecPerPeer);
}

export const overheadOf = (s: SystemModel, share: number) => s.overheadS + s.overheadPerPeerS / share;

/** The expected time of one step with no churn, and its parts. */
export function simulateStep(c: ClusterModel, s: SystemModel, w: Workload): StepBreakdown {
  if (!(Number.isInteger(c.peers) && c.peers >= 1)) throw new RangeError(`simulateStep: peers must be an integer >= 1, got ${c.peers}`);
  if (!(c.share > 0 && c.share <= 1)) throw new RangeError(`simulateStep: share must be in (0, 1], got ${c.share}`);
  if (!(c.imagesPerSecPerPeer > 0 && c.link.bandwidthBytesPerS > 0 && c.link.latencyS >= 0 && c.stragglerMean >= 0)) {
    throw new RangeError(`simulateStep: speed and bandwidth must be > 0, latency and straggler >= 0: ${JSON.stringify(c)}`);
  }
  if (s.steal?.auto) {
    // The tuner keeps the faster way and, once that keeps winning, probes the other AUTO_PROBE steps in every AUTO_MAX_INTERVAL + 2 AUTO_PROBE.
    const { auto: _, ...always } = s.steal;
    const on = simulateStep(c, { ...s, steal: always }, w), off = simulateStep(c, { ...s, steal: undefined }, w);
    const [best, other] = on.totalS < off.totalS ? [on, off] : [off, on];
    const p = AUTO_PROBE / (AUTO_MAX_INTERVAL + 2 * AUTO_PROBE);
    return { ...best, totalS: (1 - p) * best.totalS + p * other.totalS };
  }
  const t = w.batch / (c.peers * c.imagesPerSecPerPeer * c.share);
  const topology = topologyFor(s, c.peers);
  const wire = s.wireScale ?? 1;
  const full = allReduceTime(c.link, topology, c.peers, w.profile.gradBytes * wire);
  const steal = s.steal && c.peers > 1 ? s.steal : null;
  let computeS = t * (1 + c.stragglerMean * harmonic(c.peers));
  let backwardS = computeS * w.profile.backwardShare;
  if (!steal && s.microBatchImages !== undefined) {
    const slice = w.batch / c.peers;
    const parts = Math.ceil(slice / s.microBatchImages);
    computeS += ((parts - 1) * (s.microBatchS ?? 0)) / c.share;
    backwardS *= Math.min(1, s.microBatchImages / slice);
  }
  if (steal) {
    const chunk = steal.chunk ?? autoChunk(Math.floor(steal.fraction * w.batch), c.peers, c.imagesPerSecPerPeer * c.share);
    const tau = chunk / (c.imagesPerSecPerPeer * c.share);
    // Chunks until the slowest fixed part is done (every rate known), then the final grants.
    const chunksPerPeer = 1 + ((1 - steal.fraction) * t * c.stragglerMean * harmonic(c.peers)) / tau;
    const fluid = t / meanInverseSlowdown(c.stragglerMean);
    const slowestFixed = (1 - steal.fraction) * t * (1 + c.stragglerMean * harmonic(c.peers));
    // Micro-batches beyond the first: the fixed part and each chunk computed on its own (the last joins the final grant).
    computeS = Math.max(fluid, slowestFixed) + tau + chunksPerPeer * (Math.max(0, 2 * c.link.latencyS - tau) + (s.microBatchS ?? 0) / c.share);
    backwardS = Math.min(Math.max(WINDOW_COMM_FACTOR * full.totalS, WINDOW_COMPUTE_SHARE * computeS), steal.fraction * t) * w.profile.backwardShare;
  }
  let best = { exposed: 0, buckets: 0, bucketBytes: 0 };
  if (c.peers > 1) {
    best = { exposed: Infinity, buckets: 0, bucketBytes: 0 };
    for (const size of s.bucketBytes) {
      const buckets = bucketsOf(w.profile.layers, size, s.lastBucketBytes ?? 0);
      const exposed = exposedCommS(buckets, (bytes) => allReduceTime(c.link, topology, c.peers, bytes * wire).totalS, backwardS, s.overlap);
      if (exposed < best.exposed) best = { exposed, buckets: buckets.length, bucketBytes: Math.min(size, w.profile.gradBytes) };
    }
  }
  const latencyShare = full.totalS > 0 ? full.latencyS / full.totalS : 0;
  const overheadS = overheadOf(s, c.share);
  return {
    computeS, backwardS, allReduceS: full.totalS,
    exposedCommS: best.exposed, exposedLatencyS: best.exposed * latencyShare, exposedBandwidthS: best.exposed * (1 - latencyShare),
    overheadS, totalS: computeS + best.exposed + overheadS, buckets: best.buckets, bucketBytes: best.bucketBytes, steals: steal !== null,
  };
}

/** Images/s of all peers each training alone (share 1, no all-reduce): the ideal of N peers. */
export function aloneThroughput(c: ClusterModel, s: SystemModel, batch: number): number {
  const o = overheadOf(s, 1);
  return peerSpeeds(c).reduce((sum, ci) => sum + batch / ((batch * (1 + c.stragglerMean)) / ci + o), 0);
}

/** throughput(N) / sum_i throughput_i(alone) with no churn (share 1). */
export function efficiency(c: ClusterModel, s: SystemModel, w: Workload): number {
  const one = { ...c, share: 1 };
  return w.batch / simulateStep(one, s, w).totalS / aloneThroughput(one, s, w.batch);
}

/** What the step's dominant cost is: 'compute', 'bandwidth', 'latency' or 'overhead', with its share of the step. */
export function boundOf(t: StepBreakdown): { bound: 'compute' | 'bandwidth' | 'latency' | 'overhead'; share: number } {
  const parts = [['compute', t.computeS], ['bandwidth', t.exposedBandwidthS], ['latency', t.exposedLatencyS], ['overhead', t.overheadS]] as const;
  let best: (typeof parts)[number] = parts[0];
  for (const p of parts) if (p[1] > best[1]) best = p;
  return { bound: best[0], share: best[1] / t.totalS };
}

/**
 * E[1 / (1 + X)] for X exponential of mean mu (0: 1): a peer's mean rate in a step, relative to
 * its rate undisturbed. Simpson's rule over [0, 50 mu] (the rest of the density is below e^-50).
 */
export function meanInverseSlowdown(mu: number): number {
  if (!(mu >= 0)) throw new RangeError(`meanInverseSlowdown: mu must be >= 0, got ${mu}`);
  if (mu === 0) return 1;
  const n = 2000;
  const h = (50 * mu) / n;
  const f = (x: number) => Math.exp(-x / mu) / mu / (1 + x);
  let sum = f(0) + f(n * h);
  for (let k = 1; k < n; k++) sum += (k % 2 ? 4 : 2) * f(k * h);
  return (sum * h) / 3;
}
