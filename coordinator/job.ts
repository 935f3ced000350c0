// A training job: its validated config (parsed from untrusted JSON: a job file or an admin
// request) and the pure membership rules the coordinator applies at step boundaries.
//
// Length: a job says `steps` or `epochs` (not both). The optimiser's schedule spans the job,
// so its totalSteps is set from that length and may not be given separately; turning epochs
// into steps needs the size of the training split, hence `trainSamples`.
import type { DatasetName } from './data/cli.ts';
import { MODEL_NAMES, type ModelName } from '../src/nn/models.ts';
import {
  OUTER_DEFAULTS, AUTO_SYNC_MAX, MAX_SYNC_EVERY, OptimError, checkOuterConfig, parseOptimizerConfig, type OptimizerConfig, type OuterConfig,
} from '../src/optim/index.ts';
import { MAX_BATCH, MAX_RING, MAX_TOKEN_LENGTH } from '../src/protocol/messages.ts';
import { FieldReader } from '../src/protocol/fields.ts';
import { stepsPerEpoch } from '../src/train/sampler.ts';
import { DEFAULT_TWO_LEVEL_FROM } from './two-level.ts';
import { WIRE_FORMATS, type WireFormat } from '../src/protocol/frames.ts';
import { MAX_STEAL_FRACTION, type StealSettings } from './tail-pool.ts';

// Listed here rather than imported from ./data/cli.ts, which would load the shard builders
// (sharp) into every process that only reads a job; job.test.ts checks the lists agree.
export const JOB_DATASETS: readonly DatasetName[] = ['cifar10', 'mnist', 'imagenet'];

export type JobAccess = { kind: 'public' } | { kind: 'private'; joinToken: string };

export interface JobConfig {
  name: string;
  model: ModelName;
  dataset: DatasetName;
  /** B: images per step over the whole ring. */
  globalBatch: number;
  optimizer: OptimizerConfig;
  totalSteps: number;
  stepsPerEpoch: number;
  /** Evaluate on the val split every this many steps (0: only at the end). */
  evalEvery: number;
  /** K: a checkpoint every K steps. */
  checkpointEvery: number;
  /** N: the newest N checkpoints are kept. */
  keepCheckpoints: number;
  access: JobAccess;
  /** Seeds the epoch permutations and the weight initialisation. */
  seed: number;
  /** The first ring (and a ring formed again after everyone left) waits for this many peers. */
  minPeers: number;
  /**
   * Synchronisation: syncEvery 1 is exact synchronous SGD (every step's gradient all-reduced);
   * syncEvery H > 1 trains in rounds of H local steps and an outer Nesterov step (src/optim/outer.ts);
   * "auto" (outer.auto) lets the coordinator pick H up to AUTO_SYNC_MAX as it goes (sync-auto.ts).
   */
  outer: OuterConfig;
  /**
   * Label smoothing of the training loss, in [0, 0.5]: targets (1 - eps) onehot + eps / K.
   * 0 (the default, and every job written before it existed) is plain cross-entropy.
   */
  labelSmoothing: number;
  /**
   * How a step's ids are drawn (src/train/sampler.ts): 'global' (the default, and every job
   * written before it existed) from a permutation of the whole split; 'shard-local' from a
   * window of `shuffleWindow` shards at a time, so each peer downloads few shards.
   */
  sampling: JobSampling;
  /** Shard-local sampling: shards per block (ignored by 'global'). */
  shuffleWindow: number;
  /**
   * A generation of this many peers or more all-reduces in two levels (groups, then columns:
   * coordinator/two-level.ts); 0: never. Default DEFAULT_TWO_LEVEL_FROM (16).
   */
  twoLevelFrom: number;
  /**
   * The sync step's gradient buckets (src/client/sync-step.ts), each summed over the ring as soon
   * as backward produced it: at most this many bytes each (absent: 25 MiB), whole tensors only.
   */
  bucketBytes?: number;
  /**
   * The cap of the bucket all-reduced last (the first layers', exposed after backward ends):
   * src/nn/buckets.ts bucketPlan (absent: DEFAULT_LAST_BUCKET_BYTES, 1 MiB; 0: no such cut).
   */
  lastBucketBytes?: number;
  /** false: one bucket, i.e. the whole backward, then one all-reduce (absent: true, overlapped). */
  overlap?: boolean;
  /**
   * How long a volunteer waits for its ring's links to open before it reports which could not (absent: RING_FORM_TIMEOUT_MS,
   * 15 s): a peer nobody can reach is found that much sooner on a network whose links open fast.
   */
  ringFormMs?: number;
  /**
   * How every all-reduce of the job sends its values (src/protocol/codec.ts): 'f32' (the default, and
   * every job written before it existed), 'f16' / 'bf16', half the bytes (float32 sums), or 'i8',
   * a quarter, with error feedback (sync steps only: a round's change is no gradient to carry).
   */
  wire: WireFormat;
  /**
   * Work stealing at each sync step's end (coordinator/tail-pool.ts): `stealFraction` of every
   * member's slice waits at the coordinator and goes in chunks of `stealChunk` ids (absent:
   * tail-pool.ts autoChunk) to whoever asks first, then in final grants sized to each member's
   * rate. `auto` (the job file's stealFraction "auto" or none: the default): 3/4 of each slice,
   * on the steps where the coordinator measured it pays (coordinator/steal-tuner.ts). Absent
   * (stealFraction 0, or shard-local sampling without one): no stealing.
   */
  steal?: JobSteal;
  /**
   * Verification of untrusted peers (coordinator/audits.ts): the chance in [0, 1] that each member
   * is audited in a step (its slice recomputed by another member); above 0 every sync step also
   * checks the members' sketches against the ring's sum. 0 (the default, and every job written
   * before it existed): no verification.
   */
  verify: number;
  /**
   * Ghost batch norm (src/nn/model.ts): BN statistics over each run of `bnGroup` images of a step
   * (Goyal et al.'s per-worker BN batch), groups fixed by (seed, step) and handed out whole
   * (coordinator/bn-groups.ts), so a peer may compute its slice in micro-batches of whole groups
   * and N peers still equal one. Absent: BN over each peer's slice, which must then fit the peer at once.
   */
  bnGroup?: number;
}

/** A job's work stealing: always (a stealFraction), or where it measures faster (auto). */
export interface JobSteal extends StealSettings { auto?: boolean }

/** A job's wire format when its file names none. */
export const DEFAULT_WIRE: WireFormat = 'f32';

/** The job file's `wire` field: none for the default, so an f32 job's file stays as before. */
export const wireField = (wire: WireFormat): { wire?: WireFormat } => (wire === DEFAULT_WIRE ? {} : { wire });

/** The smallest gradient bucket a job may ask for (a model is cut into at most 256). */
export const MIN_BUCKET_BYTES = 4096;

export const JOB_SAMPLINGS = ['global', 'shard-local'] as const;
export type JobSampling = (typeof JOB_SAMPLINGS)[number];
export const DEFAULT_SHUFFLE_WINDOW = 16;
/** A block's shards are shuffled in memory on the coordinator; past this a block is most of ImageNet's 1,281 shards. */
export const MAX_SHUFFLE_WINDOW = 1024;

export class JobError extends Error {
  readonly kind = 'bad-job';
  constructor(readonly problems: string[]) {
    super(`bad job config: ${problems.join('; ')}; fix the job file (see coordinator/job.ts for the fields).`);
    this.name = 'JobError';
  }
}

const FIELDS = [
  'name', 'model', 'dataset', 'globalBatch', 'optimizer', 'steps', 'epochs', 'evalEvery', 'checkpointEvery', 'keepCheckpoints', 'access', 'joinToken',
  'seed', 'minPeers', 'syncEvery', 'outerLr', 'outerMomentum', 'syncWarmup', 'momentumCarry', 'labelSmoothing', 'sampling', 'shuffleWindow',
  'twoLevelFrom', 'bucketBytes', 'lastBucketBytes', 'overlap', 'wire', 'stealFraction', 'stealChunk', 'bnGroup', 'verify', 'ringFormMs',
];
/** The range of a job's ringFormMs: a LAN's rings form in well under a second, TURN across the world's in a few. */
export const RING_FORM_MS_RANGE = [2_000, 120_000] as const;
/** Past this the target puts nearly as much on the wrong classes as on the label. */
export const MAX_LABEL_SMOOTHING = 0.5;
/** A join token shorter than this is guessable: refuse it rather than protect a job with it. */
export const MIN_JOIN_TOKEN = 16;
export const JOIN_TOKEN_PATTERN = new RegExp(`^[\\x21-\\x7e]{${MIN_JOIN_TOKEN},}$`);
export const JOIN_TOKEN_RULE = `a token of ${MIN_JOIN_TOKEN}..${MAX_TOKEN_LENGTH} printable characters`;

/** Parses a job config; throws one JobError listing every problem. */
export function parseJobConfig(input: unknown, trainSamples: number): JobConfig {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new JobError([`expected a JSON object, got ${Array.isArray(input) ? 'an array' : typeof input}`]);
  }
  const r = new FieldReader(input as Record<string, unknown>);
  r.only(FIELDS);
  const model = r.oneOf('model', MODEL_NAMES);
  const dataset = r.oneOf('dataset', JOB_DATASETS);
  const globalBatch = r.int('globalBatch', 1, Math.min(MAX_BATCH, trainSamples));
  const spe = stepsPerEpoch(trainSamples, Math.max(1, globalBatch));
  let totalSteps = 1;
  if (r.has('steps') === r.has('epochs')) r.problems.push('give exactly one of steps or epochs');
  else if (r.has('steps')) totalSteps = r.int('steps', 1, 2 ** 32 - 1);
  else totalSteps = r.int('epochs', 1, 100_000) * spe;
  const access = r.has('access') ? r.oneOf('access', ['public', 'private'] as const) : 'public';
  let jobAccess: JobAccess = { kind: 'public' };
  if (access === 'private') {
    jobAccess = { kind: 'private', joinToken: r.str('joinToken', MAX_TOKEN_LENGTH, JOIN_TOKEN_PATTERN, `${JOIN_TOKEN_RULE} (a private job needs one)`) };
  } else if (r.has('joinToken')) r.problems.push('joinToken is only for access "private": set access or drop the token');
  const config: JobConfig = {
    name: r.has('name') ? r.str('name', 64) : 'job',
    model, dataset, globalBatch,
    optimizer: readOptimizer(r, totalSteps),
    totalSteps, stepsPerEpoch: spe,
    evalEvery: r.has('evalEvery') ? r.int('evalEvery', 0, 2 ** 32 - 1) : spe,
    checkpointEvery: r.has('checkpointEvery') ? r.int('checkpointEvery', 1, 2 ** 32 - 1) : 50,
    keepCheckpoints: r.has('keepCheckpoints') ? r.int('keepCheckpoints', 1, 100) : 3,
    access: jobAccess,
    seed: r.has('seed') ? r.int('seed', 0, 2 ** 32 - 1) : 0,
    minPeers: r.has('minPeers') ? r.int('minPeers', 1, MAX_RING) : 1,
    outer: readOuter(r),
    labelSmoothing: r.has('labelSmoothing') ? r.num('labelSmoothing', 0, MAX_LABEL_SMOOTHING) : 0,
    ...readSampling(r),
    twoLevelFrom: r.has('twoLevelFrom') ? r.int('twoLevelFrom', 0, MAX_RING) : DEFAULT_TWO_LEVEL_FROM,
    ...(r.has('bucketBytes') ? { bucketBytes: r.int('bucketBytes', MIN_BUCKET_BYTES, 2 ** 30) } : {}),
    ...(r.has('lastBucketBytes') ? { lastBucketBytes: r.int('lastBucketBytes', 0, 2 ** 30) } : {}),
    ...(r.has('overlap') ? { overlap: r.bool('overlap') } : {}),
    wire: r.has('wire') ? r.oneOf('wire', WIRE_FORMATS) : DEFAULT_WIRE,
    ...readSteal(r, globalBatch),
    ...(r.has('bnGroup') ? { bnGroup: r.int('bnGroup', 1, Math.max(1, globalBatch)) } : {}),
    verify: r.has('verify') ? r.num('verify', 0, 1) : 0,
    ...(r.has('ringFormMs') ? { ringFormMs: r.int('ringFormMs', ...RING_FORM_MS_RANGE) } : {}),
  };
  if (config.bnGroup !== undefined && globalBatch % config.bnGroup !== 0) {
    r.problems.push(`globalBatch ${globalBatch} must be whole BN groups of bnGroup ${config.bnGroup}: change one of them`);
  }
  // Stealing hands out chunks of any size, which would cut BN groups: a job with groups never steals unless it asks.
  if (config.bnGroup !== undefined && config.steal?.auto) delete config.steal;
  // A member that claimed tail ids cannot be audited (audits.ts): a verified job never steals unless it asks, and may not ask.
  if (config.verify > 0 && config.steal?.auto) delete config.steal;
  if (config.verify > 0 && config.steal) {
    r.problems.push('work stealing (stealFraction) hands members tail ids that an audit cannot recompute, so a verified job (verify > 0) '
      + 'does not steal: drop stealFraction, or set verify 0');
  }
  if (config.bnGroup !== undefined && config.steal) {
    r.problems.push('work stealing (stealFraction) hands out chunks that would cut BN groups (bnGroup): drop one of them');
  }
  if (config.overlap === false && config.bucketBytes !== undefined) {
    r.problems.push('bucketBytes cuts the buckets of an overlapped all-reduce: drop it, or drop overlap: false');
  }
  if (config.overlap === false && config.lastBucketBytes !== undefined) {
    r.problems.push('lastBucketBytes cuts the buckets of an overlapped all-reduce: drop it, or drop overlap: false');
  }
  if (config.lastBucketBytes !== undefined && config.lastBucketBytes > 0 && config.lastBucketBytes < MIN_BUCKET_BYTES) {
    r.problems.push(`lastBucketBytes must be 0 (no cut) or at least ${MIN_BUCKET_BYTES}, got ${config.lastBucketBytes}`);
  }
  if (config.wire === 'i8' && config.outer.syncEvery > 1) {
    r.problems.push("the i8 wire carries what it drops into the next step's gradient (error feedback), which rounds (syncEvery > 1 or \"auto\") do not have: "
      + 'use bf16 for rounds, or syncEvery 1');
  }
  if (config.verify > 0 && config.wire === 'i8') {
    r.problems.push("verify checks the sketches against the wire's rounding per value, which the i8 wire's scaled frames do not have: use bf16 or f32");
  }
  if (config.verify > 0 && config.outer.syncEvery > 1 && config.outer.carry === undefined) {
    r.problems.push("verify in rounds recomputes a member's round from the round's start, which needs every peer's inner momentum equal: "
      + 'set momentumCarry (0.75, as npm start does), or verify 0');
  }
  if (config.outer.syncEvery * globalBatch > MAX_BATCH) {
    r.problems.push(`a round's ids travel in one message: syncEvery x globalBatch must be at most ${MAX_BATCH}, `
      + `got ${config.outer.syncEvery} x ${globalBatch}`);
  }
  if (r.problems.length) throw new JobError(r.problems);
  return config;
}

function readSteal(r: FieldReader, globalBatch: number): Pick<JobConfig, 'steal'> {
  const shardLocal = r.has('sampling') && r.o.sampling === 'shard-local';
  const chunk = (): { chunk?: number } => (r.has('stealChunk') ? { chunk: r.int('stealChunk', 1, Math.max(1, globalBatch)) } : {});
  // None or "auto": stealing where it measures faster (steal-tuner.ts); never with shard-local sampling.
  if (!r.has('stealFraction') || r.o.stealFraction === 'auto') {
    if (!shardLocal) return { steal: { fraction: MAX_STEAL_FRACTION, auto: true, ...chunk() } };
    if (r.has('stealFraction')) {
      r.problems.push('work stealing (stealFraction "auto") moves ids between members, which sampling "shard-local" keeps on their shards: drop stealFraction');
    }
    if (r.has('stealChunk')) r.problems.push('stealChunk sizes the grants of work stealing, which sampling "shard-local" never does: drop it');
    return {};
  }
  if (typeof r.o.stealFraction !== 'number') {
    r.problems.push(`stealFraction must be "auto" or a number in [0, ${MAX_STEAL_FRACTION}] (0: never steal), `
      + `got ${JSON.stringify(r.o.stealFraction).slice(0, 40)}`);
    return {};
  }
  const fraction = r.num('stealFraction', 0, MAX_STEAL_FRACTION);
  if (fraction === 0) {
    if (r.has('stealChunk')) r.problems.push('stealChunk sizes the grants of work stealing, which stealFraction 0 turns off: drop it');
    return {};
  }
  if (shardLocal) {
    r.problems.push('work stealing (stealFraction) moves ids between members, which sampling "shard-local" keeps on their shards: drop one of them');
  }
  return { steal: { fraction, ...chunk() } };
}

function readSampling(r: FieldReader): Pick<JobConfig, 'sampling' | 'shuffleWindow'> {
  const sampling = r.has('sampling') ? r.oneOf('sampling', JOB_SAMPLINGS) : 'global';
  const shuffleWindow = r.has('shuffleWindow') ? r.int('shuffleWindow', 1, MAX_SHUFFLE_WINDOW) : DEFAULT_SHUFFLE_WINDOW;
  if (sampling === 'global' && r.has('shuffleWindow')) r.problems.push('shuffleWindow applies to sampling "shard-local": set sampling or drop it');
  return { sampling, shuffleWindow };
}

function readOuter(r: FieldReader): OuterConfig {
  // "auto": the coordinator picks H in 1 .. AUTO_SYNC_MAX as the job runs (sync-auto.ts); the peers hold the rounds' state for it.
  const auto = r.o.syncEvery === 'auto';
  if (typeof r.o.syncEvery === 'string' && !auto) {
    r.problems.push(`syncEvery must be "auto" or an integer in [1, ${MAX_SYNC_EVERY}], got ${JSON.stringify(r.o.syncEvery).slice(0, 40)}`);
  }
  const outer: OuterConfig = {
    syncEvery: auto
      ? AUTO_SYNC_MAX
      : r.has('syncEvery') && typeof r.o.syncEvery !== 'string' ? r.int('syncEvery', 1, MAX_SYNC_EVERY) : OUTER_DEFAULTS.syncEvery,
    lr: r.has('outerLr') ? r.num('outerLr', Number.MIN_VALUE, 10) : OUTER_DEFAULTS.lr,
    momentum: r.has('outerMomentum') ? r.num('outerMomentum', 0, 0.999) : OUTER_DEFAULTS.momentum,
    warmup: r.has('syncWarmup') ? r.int('syncWarmup', 0, 2 ** 32 - 1) : OUTER_DEFAULTS.warmup,
    // Absent: each peer keeps its own inner momentum (job files from before it resume as they were).
    ...(r.has('momentumCarry') ? { carry: r.num('momentumCarry', 0, 0.999) } : {}),
    ...(auto ? { auto: true as const } : {}),
  };
  if (outer.syncEvery === 1 && (r.has('outerLr') || r.has('outerMomentum') || r.has('syncWarmup') || r.has('momentumCarry'))) {
    r.problems.push('outerLr, outerMomentum, syncWarmup and momentumCarry apply to rounds (syncEvery > 1): set syncEvery or drop them');
  }
  // Sync steps after rounds need every peer's inner momentum equal, which only the carry makes so.
  if (auto && outer.carry === undefined) {
    r.problems.push('syncEvery "auto" goes back to sync steps after rounds, which needs every peer to hold the same inner momentum: '
      + 'set momentumCarry (0.75, as npm start does), or a fixed syncEvery for each peer\'s own momentum');
  }
  try {
    return checkOuterConfig(outer);
  } catch (e) {
    if (!(e instanceof OptimError)) throw e;
    r.problems.push(e.message);
    return OUTER_DEFAULTS;
  }
}

function readOptimizer(r: FieldReader, totalSteps: number): OptimizerConfig {
  const o = r.o.optimizer;
  if (typeof o !== 'object' || o === null || Array.isArray(o)) {
    r.fail('optimizer', "an object such as {\"kind\": \"lars\", \"lr\": 8}");
    return parseOptimizerConfig({ kind: 'sgd', lr: 1, totalSteps: 1 });
  }
  if ('totalSteps' in o) {
    r.problems.push('optimizer.totalSteps is set from the job\'s steps or epochs: remove it');
    return parseOptimizerConfig({ kind: 'sgd', lr: 1, totalSteps: 1 });
  }
  try {
    return parseOptimizerConfig({ ...o, totalSteps });
  } catch (e) {
    // Only the config's own complaints become problems of the job; anything else is a bug.
    if (!(e instanceof OptimError)) throw e;
    r.problems.push(`optimizer: ${e.message}`);
    return parseOptimizerConfig({ kind: 'sgd', lr: 1, totalSteps: 1 });
  }
}

/** What GET /api/job shows anyone: never the join token. */
export function publicJobInfo(job: JobConfig): Omit<JobConfig, 'access'> & { access: 'public' | 'private' } {
  return { ...job, access: job.access.kind };
}

// ---- membership ----

/** A generation: one ring of peers, in order. Membership changes only between generations. */
export interface Generation {
  readonly index: number;
  readonly ring: readonly string[];
}

/**
 * The generation after a step boundary (or an aborted step): the survivors of `current` keep
 * their order, then `joined` in the order given. An id that both joined and left stays out;
 * ids already in the ring and leavers that were not in it are ignored. With no change,
 * `current` itself is returned, so the ring need not be formed again.
 */
export function nextGeneration(current: Generation, joined: readonly string[], left: readonly string[]): Generation {
  const gone = new Set(left);
  const ring = current.ring.filter((id) => !gone.has(id));
  const seen = new Set(ring);
  for (const id of joined) {
    if (gone.has(id) || seen.has(id)) continue;
    seen.add(id);
    ring.push(id);
  }
  const same = ring.length === current.ring.length && ring.every((id, i) => id === current.ring[i]);
  return same ? current : { index: current.index + 1, ring };
}

/** Joins and leaves asked for during a step; applied together at the next boundary. */
export interface Membership {
  readonly generation: Generation;
  readonly joining: readonly string[];
  readonly leaving: readonly string[];
}

export const startMembership = (): Membership => ({ generation: { index: 0, ring: [] }, joining: [], leaving: [] });
export const requestJoin = (m: Membership, id: string): Membership => (m.joining.includes(id) ? m : { ...m, joining: [...m.joining, id] });
export const requestLeave = (m: Membership, id: string): Membership => (m.leaving.includes(id) ? m : { ...m, leaving: [...m.leaving, id] });

/** Called when a step committed or was aborted: the next generation and nothing pending. */
export function atStepBoundary(m: Membership): Membership {
  return { generation: nextGeneration(m.generation, m.joining, m.leaving), joining: [], leaving: [] };
}

// ---- per-peer slices ----

/**
 * Splits a global batch B over the ring in proportion to each peer's measured throughput
 * (images/s, by rank). Integers summing exactly to B; every slice >= 1 when B >= N. Rounding
 * is deterministic: floors, then the leftover images go one each to the largest fractional
 * parts (ties to the lower rank); a slice rounded to 0 then takes 1 from the largest slice
 * (ties to the higher rank). A peer not measured yet should be given the ring's median.
 */
export function splitBatch(globalBatch: number, throughputs: readonly number[]): number[] {
  const n = throughputs.length;
  if (!Number.isInteger(globalBatch) || globalBatch < 1) throw new RangeError(`splitBatch: global batch must be an integer >= 1, got ${globalBatch}`);
  if (n === 0) throw new RangeError('splitBatch: the ring is empty');
  const bad = throughputs.findIndex((t) => !(Number.isFinite(t) && t > 0));
  if (bad >= 0) throw new RangeError(`splitBatch: throughput of rank ${bad} must be a finite number > 0, got ${throughputs[bad]}`);
  const total = throughputs.reduce((a, b) => a + b, 0);
  const ideal = throughputs.map((t) => (globalBatch * t) / total);
  const sizes = ideal.map(Math.floor);
  const order = ideal.map((v, i) => i).sort((a, b) => ideal[b] - sizes[b] - (ideal[a] - sizes[a]) || a - b);
  // Float rounding can leave the floors a hair off; cycling keeps the sum exact regardless.
  for (let left = globalBatch - sizes.reduce((a, b) => a + b, 0), k = 0; left > 0; left--, k++) sizes[order[k % n]]++;
  if (globalBatch >= n) {
    for (let i = 0; i < n; i++) {
      if (sizes[i] > 0) continue;
      let donor = 0;
      for (let j = 1; j < n; j++) if (sizes[j] >= sizes[donor]) donor = j;
      sizes[donor]--;
      sizes[i] = 1;
    }
  }
  return sizes;
}
