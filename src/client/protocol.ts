// Every coordinator <-> peer message, as discriminated unions on `type`, with decoders that
// take untrusted `unknown` (parsed JSON from a socket or an HTTP body) and return either a
// typed value or a typed error listing every problem found. Decoders never throw on bad
// input: a volunteer is a stranger, and one malformed message must not take anything down.
//
// Rules that hold for every message:
// - unknown fields are refused (a typo must not silently become "absent", and a peer cannot
//   smuggle bulk data in fields we ignore);
// - strings and arrays have size limits, numbers are finite and in range, ids are plain
//   tokens ([A-Za-z0-9_-]); generation, step, job and seed are u32 like the ring's wire
//   header (src/comm/wire.ts);
// - a whole message is at most MAX_MESSAGE_BYTES of JSON (checked before parsing).
// Peer <-> peer ring frames are binary and live in src/comm/wire.ts.
import { MAX_SYNC_EVERY } from '../optim/outer.ts';
import type { RingErrorKind } from '../comm/errors.ts';
import type { Topology } from '../comm/topology.ts';
import { readTopology } from './protocol-topology.ts';

/**
 * 2: ring links open with a PLAN frame, and a generation's collectives are numbered per gradient
 * bucket (step * 256 + k): a volunteer of version 1 could not share a ring with these.
 * 3: assignments and prepares carry `shape`, an edit of the last ring the session was sent,
 * in place of `ring` and `topology` (src/client/ring-shape.ts): version 2 would refuse them.
 */
export const PROTOCOL_VERSION = 3;
/**
 * The session WebSocket (`ws://host:port/api/session?peer=<peerId>&token=<signalingToken>`):
 * after POST /api/join, every PeerMessage but `join` goes up it and every CoordinatorMessage
 * but `join-accept` comes down it, one JSON text per WebSocket message. Its closing is the
 * coordinator's fastest sign that a peer has gone.
 */
export const SESSION_PATH = '/api/session';
/** Largest JSON text we parse: a step assignment of a 65,536-sample slice fits with room. */
export const MAX_MESSAGE_BYTES = 1 << 20;
export const MAX_ID_LENGTH = 64;
export const MAX_TOKEN_LENGTH = 256;
export const MAX_TEXT_LENGTH = 1000;
export const MAX_RING = 1024;
export const MAX_BATCH = 65_536;
export const MAX_SAMPLE_ID = 2 ** 31 - 1;

const U32 = 2 ** 32 - 1;
/** A timing above a day is a bug or a lie. */
const MAX_MS = 86_400_000;

// ---- messages from a peer to the coordinator ----

/** POST /api/join body. `token` is the job's join token (private jobs only). */
export interface JoinRequest { type: 'join'; protocol: number; token?: string; name?: string }
export interface Heartbeat { type: 'heartbeat'; peerId: string; generation: number; step: number }
export interface StepTimings {
  computeMs: number;
  commMs: number;
  waitMs: number;
  /** Of the step's time since its assignment arrived, how long it waited for its images (fetch and decode not yet done by prefetch). */
  dataMs?: number;
  /** A sync step (src/client/sync-step.ts): the all-reduce after the last gradient bucket reached the host, i.e. the communication backward did not hide. */
  exposedCommMs?: number;
  /** A sync step: its time that was neither compute nor exposed communication (host work between backward stages, yields). */
  overheadMs?: number;
}
/** How a peer's link to its ring successor runs: straight between the two, or through a TURN relay. */
export type LinkKind = 'direct' | 'relayed';
export const LINK_KINDS: readonly LinkKind[] = ['direct', 'relayed'];
export interface StepResult {
  type: 'step-result';
  peerId: string;
  generation: number;
  step: number;
  /** Mean loss over this peer's slice; null when it was not finite (JSON has no NaN). */
  loss: number | null;
  /** Hex digest of the weights after the step: every peer of a ring must report the same. */
  checksum: string;
  timings: StepTimings;
  /** Images of this peer's slice (computed now, or `reused` from its kept sum). */
  images: number;
  /**
   * Of `images`, how many came from the gradient sum this peer kept from an aborted attempt of
   * the step (the assignment's `reuse`), not computed in this attempt. Absent: none.
   */
  reused?: number;
  /** Its link to ring[rank + 1] (absent in a ring of one, or when the transport cannot tell). */
  link?: LinkKind;
  /** Its link from ring[rank - 1], as seen from this end (the coordinator combines both ends' views). */
  linkPrev?: LinkKind;
  /** Bytes this peer sent to its ring successor in the step's (or round's) all-reduce. */
  sentBytes?: number;
  /** Shard bytes this peer has downloaded from the coordinator since it joined (cache misses; a running total). */
  fetchedBytes?: number;
}
export const FAILURE_KINDS: readonly RingErrorKind[] = ['peer-closed', 'peer-timeout', 'stalled', 'stale', 'bad-frame', 'aborted', 'connect-failed', 'closed', 'bad-input'];
/** A collective failed: `failedPeerId` is the peer the RingError blames. */
export interface CollectiveFailure { type: 'collective-failure'; peerId: string; generation: number; step: number; failedPeerId: string; kind: RingErrorKind }
/** The checkpoint this peer is about to upload (the body of the upload must match). */
export interface CheckpointAnnounce { type: 'checkpoint-announce'; peerId: string; generation: number; step: number; bytes: number; sha256: string }
/**
 * A peer leaves. afterStep: stopped by its owner mid-step, it finishes the step it is in (the
 * ring keeps its slice; the coordinator lets it go at the step's commit, with 'done') instead of
 * leaving now; absent: it is gone now.
 */
export interface Leave { type: 'leave'; peerId: string; reason?: string; afterStep?: boolean }
/** This peer holds the weights of `step` (loaded from the seed or a checkpoint) and can enter a ring. */
export interface Ready { type: 'ready'; peerId: string; step: number; checksum: string; device: string }
/** The model's answer for one shown test image. */
export interface EvalPrediction { id: number; label: number; predicted: number; confidence: number }
/** Most classes a confusion matrix is asked for (100 x 100 counts in one message). */
export const MAX_CONFUSION_CLASSES = 100;
/** Most test images per evaluation whose predictions are reported one by one (the dashboard's grid). */
export const MAX_SHOWN = 64;
/**
 * Summed evaluation counts over the ids an `evaluate` message gave this peer; with
 * `confusion` asked, counts[true class * classes + predicted class]; `predictions` for the
 * message's `show` ids that were among its ids.
 */
export interface EvalCounts { samples: number; top1: number; top5: number; lossSum: number; confusion?: number[]; predictions?: EvalPrediction[] }
export interface EvalResult { type: 'eval-result'; peerId: string; step: number; counts: EvalCounts }

/** The links of the `prepare` message `id` that this peer dials are open (or failed): the coordinator may switch to that ring. */
export interface Prepared { type: 'prepared'; peerId: string; id: number }

export type PeerMessage = JoinRequest | Heartbeat | StepResult | CollectiveFailure | CheckpointAnnounce | Leave | Ready | EvalResult | Prepared;

// ---- messages from the coordinator to a peer ----

export interface JoinAccept {
  type: 'join-accept';
  peerId: string;
  /** Presented to the PeerJS server at `signalingPath` (it refuses ids it did not issue). */
  signalingToken: string;
  signalingPath: string;
  job: number;
  /** Send a heartbeat at least this often, or be dropped from the next generation. */
  heartbeatMs: number;
  /** Step of the checkpoint to load before entering (GET /api/checkpoints/latest); null: start from the seed. */
  checkpointStep: number | null;
  /** STUN/TURN servers for WebRTC (RTCIceServer); TURN entries carry short-lived credentials. */
  iceServers: IceServer[];
}
/** One ICE server as RTCConfiguration takes it. */
export interface IceServer { urls: string[]; username?: string; credential?: string }
export interface StepAssignment {
  type: 'step-assignment';
  job: number;
  generation: number;
  step: number;
  /** The ring in order: ring[rank] is this peer. */
  ring: string[];
  rank: number;
  /** Global batch B: the summed gradient is divided by B whatever this peer's slice. */
  globalBatch: number;
  /** This peer's slice of the step's sample ids (src/train/sampler.ts). */
  sampleIds: number[];
  epoch: number;
  seed: number;
  /** Upload the weights of `step` (committed) as a checkpoint before training it. */
  uploadCheckpoint?: boolean;
  /**
   * Low-communication rounds (job syncEvery > 1): the round of inner steps step .. step + H' - 1
   * (H' = ids.length). `sampleIds` is then empty and `epoch` that of the first inner step.
   */
  round?: RoundAssignment;
  /**
   * This peer's slice of the NEXT step if the ring stays as it is (sync mode): its ids depend
   * only on (seed, step), so the peer fetches and decodes them while this step computes. A hint:
   * the next assignment is what counts.
   */
  next?: NextSlice;
  /**
   * A re-run of a step whose earlier attempt lost a member (coordinator/slice-rerun.ts): the
   * first `count` ids of `sampleIds` are exactly this peer's slice of the step in generation
   * `generation`. A peer that kept that slice's gradient sum (copied before the all-reduce)
   * adds it and computes only the other ids; one that did not (it joined later, restarted, or
   * kept another step's, generation's or ids' sum) computes all of `sampleIds`. Either way the
   * step sums the same samples.
   */
  reuse?: SliceReuse;
  /**
   * A two-level generation (coordinator/two-level.ts): the ring cut into groups (`ring` is the
   * groups one after the other) and the shard owners' columns; the peer forms its group ring and
   * its column ring and sums with allReduceTwoLevel (src/comm/hierarchical.ts). Absent: the flat ring.
   */
  topology?: Topology;
}
/** Which kept gradient sum an assignment lets its peer add (StepAssignment.reuse). */
export interface SliceReuse { generation: number; count: number }
export interface NextSlice { step: number; epoch: number; sampleIds: number[] }
export interface RoundAssignment {
  /** This peer's slice of each inner step's sample ids: ids[k] belongs to global step step + k. */
  ids: number[][];
  /** The epoch of each inner step. */
  epochs: number[];
  /** Images of every member of this ring in the round: the weighted mean's denominator. */
  images: number;
}
/** Enter with the weights of `step`: from the job seed (step 0, no checkpoint) or the checkpoint of that step. */
export interface LoadState {
  type: 'load-state';
  source: 'seed' | 'checkpoint';
  step: number;
  /** Its slice of the step it will enter at, when the coordinator planned it ahead (a prefetch hint, as StepAssignment.next). */
  next?: NextSlice;
}
/** Upload the committed weights of `step` now (POST /api/checkpoints), then wait. */
export interface UploadRequest { type: 'upload-checkpoint'; step: number }
/** The job ended (its last step is done) or this peer was removed: close and exit or rejoin. */
export interface Done { type: 'done'; step: number; reason: string }
/** `unreachable`: no WebRTC link to its ring neighbours could be opened (a network problem, not misconduct). */
export interface Evicted { type: 'evicted'; reason: string; cause?: 'unreachable' }
/** Evaluate these val-split ids on the (committed) weights of `step`; answer with an eval-result. */
export interface Evaluate { type: 'evaluate'; step: number; ids: number[]; show?: number[]; confusion?: boolean }
export type ErrorKind = 'bad-request' | 'unauthorized' | 'forbidden' | 'not-found' | 'method-not-allowed' | 'too-large' | 'unsupported-media-type' | 'conflict' | 'stale' | 'too-many-requests' | 'unavailable' | 'internal';
export const ERROR_KINDS: readonly ErrorKind[] = ['bad-request', 'unauthorized', 'forbidden', 'not-found', 'method-not-allowed', 'too-large', 'unsupported-media-type', 'conflict', 'stale', 'too-many-requests', 'unavailable', 'internal'];
/** Also the body of every HTTP error response. `message` says what to do next. */
export interface ErrorMessage { type: 'error'; kind: ErrorKind; message: string }

/**
 * Make before break: the ring the coordinator means to switch to at a coming step boundary
 * (joiners in, leavers out), sent while the current ring trains on. Each member dials its
 * successors in it now (link-pool.ts keeps the links idle), so that generation's rings form
 * from kept links; it answers `prepared` with the same id. A hint: the assignment is what counts.
 */
export interface PrepareRing {
  type: 'prepare';
  id: number;
  ring: string[];
  topology?: Topology;
  /** A joiner's slice of its first step in that ring, once the coordinator has planned it (a prefetch hint). */
  next?: NextSlice;
}

export type CoordinatorMessage = JoinAccept | StepAssignment | ErrorMessage | LoadState | UploadRequest | Done | Evicted | Evaluate | PrepareRing;

/**
 * What a committed step (or round) cost the network: `innerSteps` is 1 in sync mode and the
 * round's length with rounds; `bytesPerImage` is every peer's all-reduce bytes over the images.
 */
export interface StepTraffic { innerSteps: number; bytesPerImage: number }

/**
 * Live events (GET /api/events, server-sent): the SSE event name is `type`, data the JSON.
 * Unlike the 0-based step index of assignments and results, events (and the metrics file)
 * number steps from 1: 'step' n is the n-th update committed, 'step-aborted' n the n-th
 * update being abandoned (it runs again), 'eval' / 'checkpoint' n the weights after n updates.
 */
export type LiveEvent =
  | { type: 'hello'; job: number; step: number; generation: number }
  | { type: 'peer-joined'; peerId: string; name: string | null }
  | { type: 'peer-left'; peerId: string; reason: string }
  /** `topology`: the generation's two-level plan (its groups, one after the other, are `ring`); absent: a flat ring. */
  | { type: 'generation'; generation: number; ring: string[]; peers: RingPeer[]; topology?: Topology }
  | { type: 'step'; step: number; generation: number; loss: number | null; imagesPerSec: number; peers: number; timings: PeerStepTiming[]; traffic?: StepTraffic }
  | { type: 'step-aborted'; step: number; generation: number; reason: string }
  | ({ type: 'eval' } & EvalSummary)
  | { type: 'checkpoint'; step: number }
  | { type: 'done'; step: number };

/** One line of a job's metrics (metrics.jsonl; GET /api/metrics answers { records: MetricRecord[] }). */
export type MetricRecord =
  | { type: 'step'; time: number; step: number; generation: number; ring: number; loss: number | null; imagesPerSec: number; wallMs: number; peers: (PeerStepTiming & { checksum: string })[]; traffic?: StepTraffic;
    /** Digest of the step's committed sample ids (slice-rerun.ts sampleDigest): a re-run commits the same. */
    samples?: string }
  | { type: 'abort'; time: number; step: number; generation: number; reason: string }
  | ({ type: 'eval'; time: number } & EvalSummary)
  | { type: 'checkpoint'; time: number; step: number }
  | { type: 'generation'; time: number; generation: number; ring: string[]; peers?: RingPeer[]; topology?: Topology }
  | { type: 'done'; time: number; step: number };

/**
 * An evaluation of the weights after `step` updates: over `samples` test images (`final`: the
 * job's last, on the whole test split); the confusion matrix (row-major, rows the true class)
 * and the predictions for the dashboard's grid where the peers reported them.
 */
export interface EvalSummary { step: number; top1: number; top5: number; loss: number; samples: number; final?: boolean; confusion?: number[]; predictions?: EvalPrediction[] }

/** A ring member as the dashboard draws it. */
export interface RingPeer { id: string; name: string | null; device: string }

/** One peer's part of a committed step (metrics and the dashboard's timeline). */
export interface PeerStepTiming {
  peerId: string;
  images: number;
  computeMs: number;
  commMs: number;
  waitMs: number;
  link?: LinkKind;
  /** Of `images`, those whose gradient the peer kept from an aborted attempt (StepResult.reused). */
  reused?: number;
  /** How long the peer's step waited for its images (StepTimings.dataMs). */
  dataMs?: number;
  /** The all-reduce not hidden behind backward (StepTimings.exposedCommMs). */
  exposedCommMs?: number;
  /** Neither compute nor exposed communication (StepTimings.overheadMs). */
  overheadMs?: number;
  /** The peer's running total of shard bytes downloaded (StepResult.fetchedBytes). */
  fetchedBytes?: number;
}

// ---- decoding ----

export interface DecodeError {
  kind: 'malformed' | 'unknown-type' | 'too-large';
  /** Every problem found, each naming the field ("ring[3]: ..."). */
  problems: string[];
}
export type Decoded<T> = { ok: true; value: T } | { ok: false; error: DecodeError };

export function describe(e: DecodeError): string {
  return `${e.kind} message: ${e.problems.join('; ')}`;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown): string => {
  const s = typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : Array.isArray(v) ? `an array of ${v.length}` : isObj(v) ? 'an object' : String(v);
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
};

/**
 * Reads fields of one object, recording a problem per bad field. Getters return a
 * placeholder on failure; the caller discards the value when `problems` is non-empty.
 */
export class FieldReader {
  readonly problems: string[] = [];
  constructor(readonly o: Obj, private readonly at = '') {}

  private name(key: string): string {
    return this.at ? `${this.at}.${key}` : key;
  }
  fail(key: string, rule: string): void {
    this.problems.push(`${this.name(key)} must be ${rule}, got ${show(this.o[key])}`);
  }
  /** Records fields outside `allowed`. */
  only(allowed: readonly string[]): void {
    const extra = Object.keys(this.o).filter((k) => !allowed.includes(k));
    if (extra.length) this.problems.push(`unknown field(s) ${extra.slice(0, 5).map((k) => this.name(k.slice(0, 40))).join(', ')}; allowed: ${allowed.join(', ')}`);
  }
  has(key: string): boolean {
    return this.o[key] !== undefined;
  }
  int(key: string, min: number, max: number): number {
    const v = this.o[key];
    if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v + 0; // -0 -> 0
    this.fail(key, `an integer in [${min}, ${max}]`);
    return min;
  }
  num(key: string, min: number, max: number): number {
    const v = this.o[key];
    if (typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max) return v + 0; // -0 -> 0
    this.fail(key, `a finite number in [${min}, ${max}]`);
    return min;
  }
  bool(key: string): boolean {
    const v = this.o[key];
    if (typeof v === 'boolean') return v;
    this.fail(key, 'true or false');
    return false;
  }
  str(key: string, max: number, pattern?: RegExp, rule?: string): string {
    const v = this.o[key];
    if (typeof v === 'string' && v.length > 0 && v.length <= max && (!pattern || pattern.test(v))) return v;
    this.fail(key, rule ?? `a non-empty string of at most ${max} characters`);
    return '';
  }
  id(key: string): string {
    return this.str(key, MAX_ID_LENGTH, ID_PATTERN, `an id of 1..${MAX_ID_LENGTH} characters [A-Za-z0-9_-]`);
  }
  oneOf<T extends string>(key: string, options: readonly T[]): T {
    const found = options.find((x) => x === this.o[key]);
    if (found !== undefined) return found;
    this.fail(key, `one of ${options.join(', ')}`);
    return options[0]!;
  }
  /** An array of at most `max` items, each checked by `item` (which returns a problem or null). */
  array<T>(key: string, max: number, item: (v: unknown) => string | null): T[] {
    const v = this.o[key];
    if (!Array.isArray(v) || v.length > max) {
      this.fail(key, `an array of at most ${max} items`);
      return [];
    }
    for (let i = 0; i < v.length; i++) {
      const problem = item(v[i]);
      if (problem) {
        this.problems.push(`${this.name(key)}[${i}] ${problem}, got ${show(v[i])}`);
        break; // one bad item says enough; a 65k-item array must not yield 65k problems
      }
    }
    // A copy (the caller's input stays the caller's), with -0 read as 0 like int() does; by
    // index, not v.map: an array whose prototype was replaced has none.
    const out: unknown[] = [];
    for (let i = 0; i < v.length; i++) out.push(typeof v[i] === 'number' ? (v[i] as number) + 0 : v[i]);
    return out as T[];
  }
}

export const ID_PATTERN = /^[A-Za-z0-9_-]+$/;
const HEX = /^[0-9a-f]+$/;

function u32s(r: FieldReader, ...keys: string[]): number[] {
  return keys.map((k) => r.int(k, 0, U32));
}

type Fields<T> = Omit<T, 'type'>;
type Reader<T> = (r: FieldReader) => Fields<T>;

function readJoin(r: FieldReader): Fields<JoinRequest> {
  r.only(['type', 'protocol', 'token', 'name']);
  const protocol = r.int('protocol', 1, 1000);
  if (protocol !== PROTOCOL_VERSION && r.problems.length === 0) r.problems.push(`protocol ${protocol} is not supported by this coordinator (it speaks ${PROTOCOL_VERSION}): reload the page or update the volunteer`);
  const out: Fields<JoinRequest> = { protocol };
  if (r.has('token')) out.token = r.str('token', MAX_TOKEN_LENGTH);
  if (r.has('name')) out.name = r.str('name', MAX_ID_LENGTH);
  return out;
}

function readHeartbeat(r: FieldReader): Fields<Heartbeat> {
  r.only(['type', 'peerId', 'generation', 'step']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return { peerId: r.id('peerId'), generation: generation!, step: step! };
}

function readStepResult(r: FieldReader): Fields<StepResult> {
  r.only(['type', 'peerId', 'generation', 'step', 'loss', 'checksum', 'timings', 'images', 'reused', 'link', 'linkPrev', 'sentBytes', 'fetchedBytes']);
  const [generation, step] = u32s(r, 'generation', 'step');
  const loss = r.o.loss === null ? null : r.num('loss', -1e30, 1e30);
  let timings: StepTimings = { computeMs: 0, commMs: 0, waitMs: 0 };
  if (isObj(r.o.timings)) {
    const t = new FieldReader(r.o.timings, 'timings');
    t.only(['computeMs', 'commMs', 'waitMs', 'dataMs', 'exposedCommMs', 'overheadMs']);
    timings = { computeMs: t.num('computeMs', 0, MAX_MS), commMs: t.num('commMs', 0, MAX_MS), waitMs: t.num('waitMs', 0, MAX_MS) };
    if (t.has('dataMs')) timings.dataMs = t.num('dataMs', 0, MAX_MS);
    if (t.has('exposedCommMs')) timings.exposedCommMs = t.num('exposedCommMs', 0, MAX_MS);
    if (t.has('overheadMs')) timings.overheadMs = t.num('overheadMs', 0, MAX_MS);
    r.problems.push(...t.problems);
  } else r.fail('timings', 'an object {computeMs, commMs, waitMs}');
  const images = r.int('images', 0, MAX_BATCH);
  return {
    peerId: r.id('peerId'), generation: generation!, step: step!, loss,
    checksum: r.str('checksum', 64, HEX, 'a lower-case hex digest of 1..64 characters'),
    timings, images,
    ...(r.has('reused') ? { reused: r.int('reused', 0, images) } : {}),
    ...(r.has('link') ? { link: r.oneOf('link', LINK_KINDS) } : {}),
    ...(r.has('linkPrev') ? { linkPrev: r.oneOf('linkPrev', LINK_KINDS) } : {}),
    ...(r.has('sentBytes') ? { sentBytes: r.num('sentBytes', 0, 2 ** 53) } : {}),
    ...(r.has('fetchedBytes') ? { fetchedBytes: r.num('fetchedBytes', 0, 2 ** 53) } : {}),
  };
}

function readEvalResult(r: FieldReader): Fields<EvalResult> {
  r.only(['type', 'peerId', 'step', 'counts']);
  const base = { peerId: r.id('peerId'), step: r.int('step', 0, U32) };
  if (!isObj(r.o.counts)) {
    r.fail('counts', 'an object {samples, top1, top5, lossSum}');
    return { ...base, counts: { samples: 0, top1: 0, top5: 0, lossSum: 0 } };
  }
  const e = new FieldReader(r.o.counts, 'counts');
  e.only(['samples', 'top1', 'top5', 'lossSum', 'confusion', 'predictions']);
  const samples = e.int('samples', 0, MAX_BATCH);
  const top5 = e.int('top5', 0, samples);
  const counts: EvalCounts = { samples, top1: e.int('top1', 0, top5), top5, lossSum: e.num('lossSum', 0, 1e30) };
  if (e.has('confusion')) {
    counts.confusion = e.array<number>('confusion', MAX_CONFUSION_CLASSES ** 2, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= samples ? null : `must be a count in [0, ${samples}]`));
    if (!e.problems.length && counts.confusion.reduce((a, b) => a + b, 0) !== samples) e.fail('confusion', `counts summing to samples (${samples})`);
  }
  if (e.has('predictions')) {
    counts.predictions = e.array<unknown>('predictions', MAX_SHOWN, (v) => (isObj(v) ? null : 'must be an object {id, label, predicted, confidence}')).map((v) => {
      const p = new FieldReader(v as Obj, 'predictions[]');
      p.only(['id', 'label', 'predicted', 'confidence']);
      const out = { id: p.int('id', 0, MAX_SAMPLE_ID), label: p.int('label', 0, MAX_CONFUSION_CLASSES * 100), predicted: p.int('predicted', 0, MAX_CONFUSION_CLASSES * 100), confidence: p.num('confidence', 0, 1) };
      e.problems.push(...p.problems);
      return out;
    });
  }
  r.problems.push(...e.problems);
  return { ...base, counts };
}

function readReady(r: FieldReader): Fields<Ready> {
  r.only(['type', 'peerId', 'step', 'checksum', 'device']);
  return {
    peerId: r.id('peerId'), step: r.int('step', 0, U32),
    checksum: r.str('checksum', 64, HEX, 'a lower-case hex digest of 1..64 characters'),
    device: r.str('device', MAX_TEXT_LENGTH),
  };
}

function readPrepared(r: FieldReader): Fields<Prepared> {
  r.only(['type', 'peerId', 'id']);
  return { peerId: r.id('peerId'), id: r.int('id', 0, U32) };
}

function readFailure(r: FieldReader): Fields<CollectiveFailure> {
  r.only(['type', 'peerId', 'generation', 'step', 'failedPeerId', 'kind']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return { peerId: r.id('peerId'), generation: generation!, step: step!, failedPeerId: r.id('failedPeerId'), kind: r.oneOf('kind', FAILURE_KINDS) };
}

function readAnnounce(r: FieldReader): Fields<CheckpointAnnounce> {
  r.only(['type', 'peerId', 'generation', 'step', 'bytes', 'sha256']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return {
    peerId: r.id('peerId'), generation: generation!, step: step!,
    bytes: r.int('bytes', 1, Number.MAX_SAFE_INTEGER),
    sha256: r.str('sha256', 64, /^[0-9a-f]{64}$/, 'a sha256 digest (64 lower-case hex characters)'),
  };
}

function readLeave(r: FieldReader): Fields<Leave> {
  r.only(['type', 'peerId', 'reason', 'afterStep']);
  const out: Fields<Leave> = { peerId: r.id('peerId') };
  if (r.has('reason')) out.reason = r.str('reason', MAX_TEXT_LENGTH);
  if (r.has('afterStep')) out.afterStep = r.bool('afterStep');
  return out;
}

function readAccept(r: FieldReader): Fields<JoinAccept> {
  r.only(['type', 'peerId', 'signalingToken', 'signalingPath', 'job', 'heartbeatMs', 'checkpointStep', 'iceServers']);
  return {
    peerId: r.id('peerId'),
    signalingToken: r.str('signalingToken', MAX_TOKEN_LENGTH, ID_PATTERN, 'a token [A-Za-z0-9_-]'),
    signalingPath: r.str('signalingPath', 256, /^\/[A-Za-z0-9_/-]*$/, 'an absolute URL path'),
    job: r.int('job', 0, U32),
    heartbeatMs: r.int('heartbeatMs', 100, 600_000),
    checkpointStep: r.o.checkpointStep === null ? null : r.int('checkpointStep', 0, U32),
    iceServers: readIceServers(r),
  };
}

const ICE_URL = /^(stuns?|turns?):[^\s]{1,250}$/;
const MAX_ICE_SERVERS = 16;

function readIceServers(r: FieldReader): IceServer[] {
  if (!r.has('iceServers')) return [];
  const list = r.array<unknown>('iceServers', MAX_ICE_SERVERS, (v) => (isObj(v) ? null : 'must be an object {urls, username?, credential?}'));
  const out: IceServer[] = [];
  list.forEach((v, i) => {
    if (!isObj(v)) return;
    const s = new FieldReader(v, `iceServers[${i}]`);
    s.only(['urls', 'username', 'credential']);
    const urls = s.array<string>('urls', 8, (u) => (typeof u === 'string' && ICE_URL.test(u) ? null : 'must be a stun:, stuns:, turn: or turns: URL'));
    if (urls.length === 0 && Array.isArray(s.o.urls)) s.fail('urls', 'at least one URL');
    const server: IceServer = { urls };
    if (s.has('username')) server.username = s.str('username', 256);
    if (s.has('credential')) server.credential = s.str('credential', 256);
    r.problems.push(...s.problems);
    out.push(server);
  });
  return out;
}

function readRing(r: FieldReader): string[] {
  const ring = r.array<string>('ring', MAX_RING, (v) => (typeof v === 'string' && v.length <= MAX_ID_LENGTH && ID_PATTERN.test(v) ? null : 'must be a peer id'));
  if (ring.length === 0 && Array.isArray(r.o.ring)) r.fail('ring', 'a non-empty array of peer ids');
  if (new Set(ring).size !== ring.length) r.problems.push('ring has a peer twice');
  return ring;
}

/** The message's `topology` for its `ring` into `out`, or its problem into r's. */
function readTopologyInto(r: FieldReader, out: { topology?: Topology }, ring: readonly string[]): void {
  const t = readTopology(r.o.topology, ring);
  if (t.ok) out.topology = t.value;
  else r.problems.push(t.problem);
}

function readPrepare(r: FieldReader): Fields<PrepareRing> {
  r.only(['type', 'id', 'ring', 'topology', 'next']);
  const out: Fields<PrepareRing> = { id: r.int('id', 0, U32), ring: readRing(r) };
  if (r.has('next')) out.next = readNext(r, MAX_BATCH);
  if (r.has('topology')) readTopologyInto(r, out, out.ring);
  return out;
}

function readAssignment(r: FieldReader): Fields<StepAssignment> {
  r.only(['type', 'job', 'generation', 'step', 'ring', 'rank', 'globalBatch', 'sampleIds', 'epoch', 'seed', 'uploadCheckpoint', 'round', 'next', 'reuse', 'topology']);
  const [job, generation, step, epoch, seed] = u32s(r, 'job', 'generation', 'step', 'epoch', 'seed');
  const ring = readRing(r);
  const rank = r.int('rank', 0, Math.max(0, ring.length - 1));
  const globalBatch = r.int('globalBatch', 1, MAX_BATCH);
  const sampleIds = r.array<number>('sampleIds', MAX_BATCH, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID ? null : `must be an integer in [0, ${MAX_SAMPLE_ID}]`));
  if (sampleIds.length > globalBatch) r.problems.push(`sampleIds has ${sampleIds.length} ids, more than globalBatch ${globalBatch}`);
  const out: Fields<StepAssignment> = { job: job!, generation: generation!, step: step!, ring, rank, globalBatch, sampleIds, epoch: epoch!, seed: seed! };
  if (r.has('uploadCheckpoint')) out.uploadCheckpoint = r.bool('uploadCheckpoint');
  if (r.has('round')) out.round = readRound(r, globalBatch);
  if (r.has('next')) out.next = readNext(r, globalBatch);
  if (r.has('reuse')) out.reuse = readReuse(r, sampleIds.length);
  if (out.reuse && out.round) r.problems.push('reuse is for sync steps only, not with a round');
  if (r.has('topology')) readTopologyInto(r, out, ring);
  return out;
}

/** Which kept sum a re-run may add: a generation and how many leading ids of sampleIds it covers (1..all). */
function readReuse(parent: FieldReader, slice: number): SliceReuse {
  if (!isObj(parent.o.reuse)) {
    parent.fail('reuse', 'an object {generation, count}');
    return { generation: 0, count: 0 };
  }
  const r = new FieldReader(parent.o.reuse, 'reuse');
  r.only(['generation', 'count']);
  if (slice === 0) r.problems.push('reuse needs a non-empty sampleIds');
  const out = { generation: r.int('generation', 0, U32), count: r.int('count', 1, Math.max(1, slice)) };
  parent.problems.push(...r.problems);
  return out;
}

/** The next step's slice (a prefetch hint): at most globalBatch ids. */
function readNext(parent: FieldReader, globalBatch: number): NextSlice {
  if (!isObj(parent.o.next)) {
    parent.fail('next', 'an object {step, epoch, sampleIds}');
    return { step: 0, epoch: 0, sampleIds: [] };
  }
  const r = new FieldReader(parent.o.next, 'next');
  r.only(['step', 'epoch', 'sampleIds']);
  const [step, epoch] = u32s(r, 'step', 'epoch');
  const sampleIds = r.array<number>('sampleIds', globalBatch, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID ? null : `must be an integer in [0, ${MAX_SAMPLE_ID}]`));
  parent.problems.push(...r.problems);
  return { step: step!, epoch: epoch!, sampleIds };
}

/** A round's plan: at most MAX_SYNC_EVERY inner steps, at most MAX_BATCH ids in all. */
function readRound(parent: FieldReader, globalBatch: number): RoundAssignment {
  const empty: RoundAssignment = { ids: [], epochs: [], images: 0 };
  if (!isObj(parent.o.round)) {
    parent.fail('round', 'an object {ids, epochs, images}');
    return empty;
  }
  const r = new FieldReader(parent.o.round, 'round');
  r.only(['ids', 'epochs', 'images']);
  const idOk = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID;
  const ids = r.array<number[]>('ids', MAX_SYNC_EVERY, (v) => (Array.isArray(v) && v.length <= globalBatch && v.every(idOk) ? null : `must be an array of at most globalBatch (${globalBatch}) sample ids`));
  const epochs = r.array<number>('epochs', MAX_SYNC_EVERY, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= U32 ? null : 'must be an epoch number'));
  const images = r.int('images', 1, MAX_BATCH);
  if (ids.length === 0 && Array.isArray(r.o.ids)) r.fail('ids', 'a non-empty array (one entry per inner step)');
  if (epochs.length !== ids.length) r.problems.push(`round.epochs has ${epochs.length} entries, round.ids ${ids.length}`);
  const total = ids.reduce((a, x) => a + (Array.isArray(x) ? x.length : 0), 0);
  if (total > images) r.problems.push(`round.ids hold ${total} ids, more than round.images ${images}`);
  parent.problems.push(...r.problems);
  return r.problems.length ? empty : { ids: ids.map((x) => x.map((v) => v + 0)), epochs, images };
}

function readLoadState(r: FieldReader): Fields<LoadState> {
  r.only(['type', 'source', 'step', 'next']);
  const source = r.oneOf('source', ['seed', 'checkpoint'] as const);
  const step = r.int('step', 0, U32);
  if (source === 'seed' && step !== 0 && r.problems.length === 0) r.problems.push('source "seed" is only for step 0');
  return { source, step, ...(r.has('next') ? { next: readNext(r, MAX_BATCH) } : {}) };
}

function readUploadRequest(r: FieldReader): Fields<UploadRequest> {
  r.only(['type', 'step']);
  return { step: r.int('step', 0, U32) };
}

function readDone(r: FieldReader): Fields<Done> {
  r.only(['type', 'step', 'reason']);
  return { step: r.int('step', 0, U32), reason: r.str('reason', MAX_TEXT_LENGTH) };
}

function readEvaluate(r: FieldReader): Fields<Evaluate> {
  r.only(['type', 'step', 'ids', 'show', 'confusion']);
  const idOk = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID ? null : `must be an integer in [0, ${MAX_SAMPLE_ID}]`);
  return {
    step: r.int('step', 0, U32), ids: r.array<number>('ids', MAX_BATCH, idOk),
    ...(r.has('show') ? { show: r.array<number>('show', MAX_SHOWN, idOk) } : {}),
    ...(r.has('confusion') ? { confusion: r.bool('confusion') } : {}),
  };
}

function readEvicted(r: FieldReader): Fields<Evicted> {
  r.only(['type', 'reason', 'cause']);
  return { reason: r.str('reason', MAX_TEXT_LENGTH), ...(r.has('cause') ? { cause: r.oneOf('cause', ['unreachable'] as const) } : {}) };
}

function readError(r: FieldReader): Fields<ErrorMessage> {
  r.only(['type', 'kind', 'message']);
  return { kind: r.oneOf('kind', ERROR_KINDS), message: r.str('message', MAX_TEXT_LENGTH) };
}

const PEER_READERS = {
  join: readJoin, heartbeat: readHeartbeat, 'step-result': readStepResult,
  'collective-failure': readFailure, 'checkpoint-announce': readAnnounce, leave: readLeave, ready: readReady, 'eval-result': readEvalResult, prepared: readPrepared,
} satisfies { [K in PeerMessage['type']]: Reader<Extract<PeerMessage, { type: K }>> };

const COORDINATOR_READERS = {
  'join-accept': readAccept, 'step-assignment': readAssignment, error: readError,
  'load-state': readLoadState, 'upload-checkpoint': readUploadRequest, done: readDone, evicted: readEvicted, evaluate: readEvaluate, prepare: readPrepare,
} satisfies { [K in CoordinatorMessage['type']]: Reader<Extract<CoordinatorMessage, { type: K }>> };

function decodeWith<M extends { type: string }>(readers: Record<string, Reader<M>>, input: unknown, side: string): Decoded<M> {
  if (!isObj(input)) return { ok: false, error: { kind: 'malformed', problems: [`expected a JSON object, got ${show(input)}`] } };
  const type = input.type;
  if (typeof type !== 'string' || !Object.hasOwn(readers, type)) {
    return { ok: false, error: { kind: 'unknown-type', problems: [`type must be one of ${Object.keys(readers).join(', ')} (${side}), got ${show(type)}`] } };
  }
  const r = new FieldReader(input);
  const fields = readers[type]!(r);
  if (r.problems.length) return { ok: false, error: { kind: 'malformed', problems: [`${type}: ${r.problems[0]}`, ...r.problems.slice(1)] } };
  return { ok: true, value: { type, ...fields } as unknown as M };
}

export function decodePeerMessage(input: unknown): Decoded<PeerMessage> {
  return decodeWith<PeerMessage>(PEER_READERS as Record<string, Reader<PeerMessage>>, input, 'messages a peer sends');
}

export function decodeCoordinatorMessage(input: unknown): Decoded<CoordinatorMessage> {
  return decodeWith<CoordinatorMessage>(COORDINATOR_READERS as Record<string, Reader<CoordinatorMessage>>, input, 'messages the coordinator sends');
}

/** Narrows a decoded message to one type (e.g. the body of POST /api/join must be a 'join'). */
export function expectType<M extends { type: string }, K extends M['type']>(d: Decoded<M>, type: K): Decoded<Extract<M, { type: K }>> {
  if (!d.ok) return d;
  if (d.value.type !== type) return { ok: false, error: { kind: 'unknown-type', problems: [`expected a '${type}' message here, got '${d.value.type}'`] } };
  return { ok: true, value: d.value as Extract<M, { type: K }> };
}

/** JSON text (from a socket or a body) to `unknown`, refusing oversized or unparsable text. */
export function parseJsonText(text: string, maxBytes = MAX_MESSAGE_BYTES): Decoded<unknown> {
  // UTF-16 length <= UTF-8 bytes, so this is a cheap lower bound checked before parsing.
  if (text.length > maxBytes) return { ok: false, error: { kind: 'too-large', problems: [`message is over ${maxBytes} bytes`] } };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    return { ok: false, error: { kind: 'malformed', problems: [`not JSON: ${e.message.slice(0, 200)}`] } };
  }
}
