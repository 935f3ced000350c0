// The closed-form step-time model of data-parallel training on a flat ring, and the least-squares
// pieces (fitComm, ringBytesPerPeer) that the calibrated simulator reuses: bench/scaling-sim.ts
// generalises this model (stragglers, heterogeneous speeds, buckets overlapped with backward,
// two-level rings, churn) and bench/scaling-calibrate.ts fits it. With one bucket, no overlap, a
// flat ring, no stragglers and identical peers, the simulator's step is exactly T(N) below.
// Pure functions, seconds and bytes throughout.
//
// N peers train one global batch of B images, split evenly, then sum an S-byte gradient with a
// ring all-reduce (N-1 reduce-scatter steps, then N-1 all-gather steps, each step moving one
// chunk of S/N bytes over every link at once):
//
//   T(N) = B / (N c)                     compute: each peer's B/N images at c images/s
//        + 2 (N-1) (alpha + S / (N bw))  all-reduce: 2(N-1) ring steps of latency alpha + S/N bytes
//        + o                             fixed per step: coordinator round trip, barrier, update
//
// A peer sends (and receives) 2 (N-1)/N * S bytes per step, so for large N the bandwidth term
// tends to 2 S / bw while the latency term 2 (N-1) alpha keeps growing.
//
// Scaling efficiency (same global batch): throughput(N) / (N throughput(1)) = T(1) / (N T(N)).
//
// c is the speed of a peer with its machine to itself. When peers share a machine (the local
// runs of bench/scaling.ts: N processes on one CPU), each gets a share of it, and the compute
// term becomes B / (N c share); with share = 1/N that is B / c whatever N.

/** The four constants of the model. */
export interface StepModel {
  /** c: images per second of one peer (forward + backward of its slice). */
  imagesPerSecPerPeer: number;
  /** alpha: seconds per ring step independent of its size (message latency, per-step software). */
  latencyS: number;
  /** bw: bytes per second over one link while every link of the ring carries data at once. */
  bandwidthBytesPerS: number;
  /** o: seconds per step independent of N (coordinator round trip, barrier, optimiser update). */
  overheadS: number;
}

export interface StepTime { computeS: number; commS: number; overheadS: number; totalS: number }

/** Bytes one peer sends (and receives) in a ring all-reduce of `gradBytes` over `peers` peers. */
export function ringBytesPerPeer(peers: number, gradBytes: number): number {
  return (2 * (peers - 1) / peers) * gradBytes;
}

/**
 * T(N) and its three parts for `peers` peers, a global batch of `batch`, a gradient of
 * `gradBytes`, each peer getting `share` of a machine (1: a machine each).
 */
export function predictStep(m: StepModel, peers: number, batch: number, gradBytes: number, share = 1): StepTime {
  if (!(Number.isInteger(peers) && peers >= 1)) throw new RangeError(`predictStep: peers must be an integer >= 1, got ${peers}`);
  if (!(share > 0 && share <= 1)) throw new RangeError(`predictStep: share must be in (0, 1], got ${share}`);
  const computeS = batch / (peers * m.imagesPerSecPerPeer * share);
  const commS = 2 * (peers - 1) * m.latencyS + ringBytesPerPeer(peers, gradBytes) / m.bandwidthBytesPerS;
  return { computeS, commS, overheadS: m.overheadS, totalS: computeS + commS + m.overheadS };
}

/** throughput(N) / (N throughput(1)) for the same global batch: T(1) / (N T(N)). */
export function scalingEfficiency(m: StepModel, peers: number, batch: number, gradBytes: number): number {
  return predictStep(m, 1, batch, gradBytes).totalS / (peers * predictStep(m, peers, batch, gradBytes).totalS);
}

/** What one measured run contributes to the fit (means over its steps and peers). */
export interface RunFigures {
  /** N */
  peers: number;
  /** B, images per step over the whole ring. */
  batch: number;
  /** S, bytes of the gradient each peer all-reduces. */
  gradBytes: number;
  /** The share of a machine each peer had: 1 on machines of their own, 1/N for N on one machine. */
  share: number;
  /** Seconds of compute per step on the ring's critical path (the slowest peer's slice). */
  computeS: number;
  /** Seconds of the all-reduce itself per step, once every peer has entered it (0 when N = 1). */
  commS: number;
  /** Seconds from one committed step to the next. */
  stepS: number;
}

export interface ModelFit {
  model: StepModel;
  /** How alpha and bw were found: both by least squares, or one of them pinned (see fitComm). */
  comm: 'latency+bandwidth' | 'bandwidth only';
  /** Per run: measured stepS minus the model's T(N), seconds. */
  residualsS: number[];
  /** Root mean square of the residuals, seconds. */
  rmsS: number;
}

export class FitError extends Error {
  readonly kind = 'fit';
  constructor(message: string) {
    super(message);
    this.name = 'FitError';
  }
}

/**
 * Fits the model to measured runs, one part at a time, each by ordinary least squares:
 *   1/c       from computeS = B/(N share) * (1/c) over all runs (a line through the origin);
 *   alpha, bw from commS = 2(N-1) * alpha + 2(N-1)/N * S * (1/bw) over the runs with N >= 2;
 *             alpha must come out >= 0 and bw > 0: otherwise (or with a single N, where the
 *             two columns cannot be told apart) alpha = 0 and bw alone is fitted;
 *   o         the mean over runs of the measured stepS - computeS - commS (what a step spends
 *             outside compute and all-reduce), at least 0: taken from the measured parts, not
 *             the fitted ones, so a compute misfit does not leak into it.
 * Needs at least one run with N >= 2 (for the all-reduce) and compute times > 0.
 */
export function fitStepModel(runs: readonly RunFigures[]): ModelFit {
  if (runs.length === 0) throw new FitError('no runs to fit');
  for (const r of runs) {
    if (!(Number.isInteger(r.peers) && r.peers >= 1 && r.batch > 0 && r.gradBytes > 0 && r.share > 0 && r.share <= 1
      && r.computeS > 0 && r.commS >= 0 && r.stepS > 0)) {
      throw new FitError(`run with N = ${r.peers} has unusable figures ${JSON.stringify(r)}: every time must be finite, compute and step > 0, share in (0, 1]`);
    }
  }
  const x = runs.map((r) => r.batch / (r.peers * r.share));
  const invC = dot(x, runs.map((r) => r.computeS)) / dot(x, x);
  const multi = runs.filter((r) => r.peers >= 2);
  if (multi.length === 0) throw new FitError('no run with 2 or more peers: the all-reduce cannot be fitted (run with --peers 1,2,... )');
  const comm = fitComm(
    multi.map((r) => 2 * (r.peers - 1)),
    multi.map((r) => ringBytesPerPeer(r.peers, r.gradBytes)),
    multi.map((r) => r.commS),
  );
  const rest = runs.map((r) => r.stepS - r.computeS - r.commS);
  const model: StepModel = {
    imagesPerSecPerPeer: 1 / invC, latencyS: comm.alpha, bandwidthBytesPerS: 1 / comm.invBw,
    overheadS: Math.max(0, rest.reduce((a, b) => a + b, 0) / rest.length),
  };
  const residualsS = runs.map((r) => r.stepS - predictStep(model, r.peers, r.batch, r.gradBytes, r.share).totalS);
  return { model, comm: comm.kind, residualsS, rmsS: Math.sqrt(dot(residualsS, residualsS) / residualsS.length) };
}

/**
 * Least squares y = alpha a + v b with alpha >= 0 and v = 1/bw > 0: both columns when that
 * solution is admissible, else bandwidth alone (alpha = 0, v through the origin); of the
 * admissible candidates the smaller squared error wins. (Latency alone would mean an infinite
 * bandwidth: not offered.)
 */
export function fitComm(a: number[], b: number[], y: number[]): { alpha: number; invBw: number; kind: ModelFit['comm'] } {
  type Candidate = { alpha: number; invBw: number; kind: ModelFit['comm'] };
  const sse = (c: Candidate) => y.reduce((s, yi, i) => s + (yi - c.alpha * a[i]! - c.invBw * b[i]!) ** 2, 0);
  const candidates: Candidate[] = [];
  const [aa, ab, bb, ay, by] = [dot(a, a), dot(a, b), dot(b, b), dot(a, y), dot(b, y)];
  const det = aa * bb - ab * ab;
  // Near-collinear columns (a single N, or all runs alike) make the 2x2 solve meaningless.
  if (Math.abs(det) > 1e-9 * aa * bb) {
    const alpha = (ay * bb - by * ab) / det;
    const invBw = (by * aa - ay * ab) / det;
    if (alpha >= 0 && invBw > 0) candidates.push({ alpha, invBw, kind: 'latency+bandwidth' });
  }
  if (by > 0) candidates.push({ alpha: 0, invBw: by / bb, kind: 'bandwidth only' });
  if (candidates.length === 0) throw new FitError('the all-reduce times are all 0: cannot fit a bandwidth');
  let best = candidates[0]!;
  for (const c of candidates) if (sse(c) < sse(best)) best = c;
  return best;
}

function dot(u: readonly number[], v: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < u.length; i++) s += u[i]! * v[i]!;
  return s;
}
