// Every coordinator <-> peer message, as discriminated unions on `type`. Their decoders
// (decode.ts, built on fields.ts) take untrusted `unknown` (parsed JSON from
// a socket or an HTTP body) and return either a typed value or a typed error listing every
// problem found. Decoders never throw on bad input: a volunteer is a stranger, and one
// malformed message must not take anything down.
//
// Rules that hold for every message:
// - unknown fields are refused (a typo must not silently become "absent", and a peer cannot
//   smuggle bulk data in fields we ignore);
// - strings and arrays have size limits, numbers are finite and in range, ids are plain
//   tokens ([A-Za-z0-9_-]); generation, step, job and seed are u32 like the ring's wire
//   header (src/protocol/frames.ts);
// - a whole message is at most MAX_MESSAGE_BYTES of JSON (checked before parsing).
// Peer <-> peer ring frames are binary and live in src/protocol/frames.ts.
import type { RingErrorKind } from '../comm/errors.ts';
import type { Topology } from '../comm/topology.ts';

/**
 * 2: ring links open with a PLAN frame, and a generation's collectives are numbered per gradient
 * bucket (step * 256 + k): a volunteer of version 1 could not share a ring with these.
 * 3: assignments and prepares carry `shape`, an edit of the last ring the session was sent,
 * in place of `ring` and `topology` (src/client/ring-shape.ts): version 2 would refuse them.
 * 4: a sync step may hold back a tail of its ids that its members claim in chunks as they
 * finish (`steal`, `claim`, `grant`: coordinator/tail-pool.ts); version 3 would never claim it.
 * 5: the bucket all-reduced last is cut at the job's `lastBucketBytes` (1 MiB unless it says
 * otherwise: src/nn/buckets.ts); version 4 would cut other buckets and fail every collective.
 * 6: a bucket of fewer frames than the ring (or group) has peers is cut into fewer chunks (one
 * frame each at least: src/comm/plan.ts dataChunks); version 5 would expect frames of other
 * chunks and fail every collective of a small model.
 * 7: a collective-failure carries `detail`, the failure's own words (which frame, what was
 * expected), for the coordinator's log and the eviction's reason; version 6 would refuse it.
 * 8: the accepting end of a new ring connection sends a READY frame first, and the dialing end
 * sends nothing on it before it has heard the other end (src/comm/peerjs-link.ts); version 7
 * would refuse READY as a frame of an unknown kind, and blame its sender.
 * 10: a Node volunteer's join may offer direct ring links (`direct`), its answer then carries
 * `directSecret`, and assignments and announcements carry `direct` routes (src/comm/direct-peer.ts);
 * version 9 would refuse those fields.
 * 11: an assignment may carry the ring's dead time (`deadMs`: a neighbour silent this long is
 * gone), so a link cut between two members is noticed in seconds; version 10 would refuse it.
 * 12: the dialing end of a new ring connection answers the accepting end's READY with its own,
 * and the accepting end takes the link only then (src/comm/peerjs-link.ts); a version 11 dialer
 * with nothing to send would leave a version 12 acceptor waiting until formation's timeout.
 * 13: a verified step's result over a flat ring carries `hops` (HopReport), which the coordinator
 * requires of every member there, and a round may be verified (its audit names `round`, each inner
 * step's ids); version 12 would not send hops, and would refuse a verified round.
 * 14: a join may carry `probeMsPerImage`, the volunteer's own timing of its engine (src/nn/fit.ts),
 * which the coordinator allows as silence in its first step (coordinator/silence.ts); version 13
 * would refuse the field.
 * 15: a verified step whose members' weights differ is heard before anyone is evicted: the
 * coordinator sends each member a fresh seed (`hop-seed`) and each answers with its contribution
 * and hop records sketched under it, the all-gather's relays included (`hop-sketches`:
 * coordinator/audits.ts); version 14 would refuse the message, and be evicted as silent. A hop
 * record's all-gather parts are sketched by range (src/trust/hop-sketch.ts).
 * 16: a join may carry `microBatch`, the most images the volunteer computes at once (fixed for its
 * session), and an audit may name it (AuditTask.microBatch): the auditor recomputes the slice in the
 * member's micro-batches, so a member that computes in micro-batches is audited too; and `pieces`
 * (AuditTask.pieces), the runs of a re-run's slice the member computed apart; version 15 would
 * refuse these fields.
 */
export const PROTOCOL_VERSION = 16;
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
/** The longest `detail` of a collective-failure (a reporter cuts its text to this: failureDetail). */
export const MAX_FAILURE_DETAIL = 300;
/**
 * A failure's message as a collective-failure's `detail`: its end when it is too long. An abort
 * passed on round the ring wraps the first refusal in a prefix per hop, so the cause (which frame,
 * what was expected) is at the end; the start is only who passed it on.
 */
export function failureDetail(message: string): string {
  return message.length <= MAX_FAILURE_DETAIL ? message : `…${message.slice(message.length - MAX_FAILURE_DETAIL + 1)}`;
}
export const MAX_RING = 1024;
export const MAX_BATCH = 65_536;
export const MAX_SAMPLE_ID = 2 ** 31 - 1;


// ---- messages from a peer to the coordinator ----

/** POST /api/join body. `token` is the job's join token (private jobs only). */
/**
 * `name`: what the dashboard and the credit board show (DONOR_NAME). `donor`: a donor's lasting id
 * (a browser keeps one in IndexedDB), under which the coordinator credits its work across visits;
 * without it the work is credited to the name, or to this session alone.
 */
export interface JoinRequest {
  type: 'join'; protocol: number; token?: string; name?: string; donor?: string; direct?: DirectOffer;
  /**
   * Its engine's forward + backward per image in ms, as its own probe timed it (MAX_PROBE_MS_PER_IMAGE at
   * most): before its first step is measured, the coordinator lets it be silent that long per image it
   * computes (an engine that blocks its event loop sends no heartbeat then), within a bound.
   */
  probeMsPerImage?: number;
  /**
   * The most images it computes at once (src/nn/fit.ts), fixed for its session: a larger slice runs in micro-batches of
   * at most this many. Its step results must say the same (StepResult.microBatch); audits of its slice recompute it in
   * the same micro-batches (AuditTask.microBatch), by a member that can hold them. Absent: as many as it is given.
   */
  microBatch?: number;
}
/** The most a join may say one image takes (a minute: a claim beyond it is no device to train on). */
export const MAX_PROBE_MS_PER_IMAGE = 60_000;
/**
 * A Node volunteer that accepts direct ring links (src/comm/direct-peer.ts: TLS over TCP, keyed
 * by the coordinator) says on which TCP port; the coordinator pairs it with the address the join
 * came from. Browsers never offer one.
 */
export interface DirectOffer {
  port: number;
  /**
   * The addresses it listens on (its interfaces'): when the join came from none of them (a NAT
   * between it and the coordinator), nobody is routed to it; it still dials out.
   */
  addresses?: string[];
}
/**
 * How a Node volunteer reaches a ring successor that accepts direct links: the address and port,
 * and the pre-shared key of this dialer to that peer (base64url of directKey(its secret, dialer)).
 */
export interface DirectRoute { host: string; port: number; key: string }
/** Direct routes by peer id: a message lists those of its receiver's successors in the ring it names. */
export type DirectRoutes = Record<string, DirectRoute>;
/** A direct route's key and a volunteer's direct secret: 32 bytes, base64url. */
export const DIRECT_KEY = /^[A-Za-z0-9_-]{43}$/;

/** A name a donor shows: 1 to 40 letters, digits, spaces and . _ ' - (starting with a letter or digit). */
export const DONOR_NAME = /^[\p{L}\p{N}][\p{L}\p{N} ._'-]{0,39}$/u;
/** A donor's lasting id: 8 to 64 characters [A-Za-z0-9_-]. */
export const DONOR_ID = /^[A-Za-z0-9_-]{8,64}$/;
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
/** A WebRTC link direct or through a TURN relay, or a direct TLS link between two Node volunteers (src/comm/direct-peer.ts). */
export type LinkKind = 'direct' | 'relayed' | 'tcp';
export const LINK_KINDS: readonly LinkKind[] = ['direct', 'relayed', 'tcp'];
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
  /** Of `images`, how many it was granted from the step's tail (StepAssignment.steal). Absent: none. */
  claimed?: number;
  /** Shard bytes this peer has downloaded from the coordinator since it joined (cache misses; a running total). */
  fetchedBytes?: number;
  /**
   * The most images this peer computes at once (src/nn/fit.ts): a slice larger than it ran as
   * several micro-batches, whose gradients summed on the engine. Absent: an older peer.
   */
  microBatch?: number;
  /** Verification (StepAssignment.verify): the sketch of what this peer put into the ring (its contribution). */
  sketch?: SketchReport;
  /** Verification: the sketch of the ring's sum this peer got back (every member's must be the same). */
  total?: SketchReport;
  /** Verification with an audit: the sketch of `peer`'s slice as this peer recomputed it. */
  audit?: SketchReport & { peer: string };
  /** Verification over a flat ring: the sketches of what this peer received and sent in the step's collectives (HopReport). */
  hops?: HopReport;
}
export const FAILURE_KINDS: readonly RingErrorKind[] = [
  'peer-closed', 'peer-timeout', 'stalled', 'stale', 'bad-frame', 'aborted', 'connect-failed', 'closed', 'bad-input',
];
/** A collective failed: `failedPeerId` is the peer the RingError blames. */
export interface CollectiveFailure {
  type: 'collective-failure'; peerId: string; generation: number; step: number; failedPeerId: string; kind: RingErrorKind;
  /** What the reporter saw, in its words (at most MAX_FAILURE_DETAIL characters): the coordinator logs it with the blame. */
  detail?: string;
}
/** The checkpoint this peer is about to upload (the body of the upload must match). */
export interface CheckpointAnnounce { type: 'checkpoint-announce'; peerId: string; generation: number; step: number; bytes: number; sha256: string }
/**
 * A peer leaves. afterStep: stopped by its owner mid-step, it finishes the step it is in (the
 * ring keeps its slice; the coordinator lets it go at the step's commit, with 'done') instead of
 * leaving now; absent: it is gone now.
 */
export interface Leave {
  type: 'leave'; peerId: string; reason?: string; afterStep?: boolean;
  /** It leaves because its work failed (reason: the error): the coordinator halts a job that fails so again and again (failure-streak.ts). */
  failed?: boolean;
}
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
/** A member of a step with a tail (StepAssignment.steal) asks for its next chunk; answered by a `grant`. */
export interface Claim { type: 'claim'; peerId: string; generation: number; step: number }

/** The answer to a HopSeed: this member's contribution (`sketch`) and hop records of that step under its seed. */
export interface HopSketchesMessage { type: 'hop-sketches'; peerId: string; generation: number; step: number; sketch: SketchReport; hops: RelayHopReport }

export type PeerMessage =
  | JoinRequest | Heartbeat | StepResult | CollectiveFailure | CheckpointAnnounce | Leave | Ready | EvalResult | Prepared | Claim | HopSketchesMessage;

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
  /** The join offered direct links: the secret its listener derives each dialer's key from (DIRECT_KEY). */
  directSecret?: string;
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
   * Work stealing at the step's end (coordinator/tail-pool.ts): `sampleIds` is this peer's fixed
   * part; the step's tail waits at the coordinator and goes out in chunks of `chunk` ids, then
   * in final grants (`last`) sized to each member's rate. The peer claims one grant ahead
   * (`claim`) while it computes, adds each granted chunk to its sum, and keeps claiming until a
   * grant comes back empty or final; then its last micro-batch runs with the all-reduce
   * overlapped. Its slice is then sampleIds + every granted id, in grant order.
   */
  steal?: { chunk: number };
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
  /**
   * Verification of a job that audits (its `verify`, coordinator/trust-check.ts): report the
   * sketches of this step's contribution and of the ring's sum (StepResult.sketch, total), and,
   * with `audit`, recompute another member's slice on the same weights and report its sketch.
   */
  verify?: { audit?: AuditTask };
  /** Direct routes to this peer's successors in `ring` (or its group and column rings) that accept them; absent: WebRTC. */
  direct?: DirectRoutes;
  /**
   * The ring's dead time for this generation in ms: a ring neighbour silent this long (no frame,
   * no heartbeat) is gone. The coordinator's silence limit of the member allowed the longest
   * silence (coordinator/silence.ts: its compute may block its heartbeats), plus a margin, so a
   * link cut between two members that both still reach the coordinator is noticed in seconds.
   * Absent: the volunteer's own (deadAfterMs, 120 s).
   */
  deadMs?: number;
}
/** The shortest and longest ring dead time an assignment may name (ms). */
export const MIN_DEAD_MS = 1000;
export const MAX_DEAD_MS = 600_000;
/**
 * How long a volunteer's ring formation waits for both its links to open (src/comm/link-formation.ts). In a generation's first
 * step a neighbour may be silent that long while it still forms, so the coordinator's dead time is never shorter there.
 */
export const RING_FORM_TIMEOUT_MS = 15_000;
/**
 * A slice to recompute for an audit: `peer`'s ids of the step, in its order. `seed`: sketch it
 * under this seed, not the step's (a second audit settling a dispute about an earlier attempt of
 * the step: it is compared with what the member reported then).
 */
export interface AuditTask {
  peer: string; sampleIds: number[]; epoch: number; seed?: number;
  /**
   * The member computes at most this many images at once (its JoinRequest.microBatch): recompute its slice (each inner
   * step's, in a round) in the micro-batches it cuts (src/nn/fit.ts microBatches). Absent: one batch.
   */
  microBatch?: number;
  /**
   * The member's sum is of these runs of `sampleIds` (their lengths, in order) computed apart, each cut into micro-batches
   * (a re-run: the sum it kept of an aborted attempt, then the ids it computes now). Absent: one run, the whole slice.
   */
  pieces?: number[];
  /** A round's audit (the step's `round`): `peer`'s slice of each inner step, recomputed from the round's start (sampleIds empty). */
  round?: number[][];
}
/**
 * A count sketch of a gradient (src/trust/sketch.ts) under the step's seed, which is
 * sketchSeed(checksum): the weights after the step, known only once every contribution was sent.
 */
export interface SketchReport { sums: number[]; squares: number[] }
/** Buckets of a reported sketch. */
export const SKETCH_LENGTH = 128;
/**
 * What a member of a flat ring received and sent in a verified step's collectives, sketched under the step's seed
 * (src/comm/hop-record.ts; checked hop by hop by coordinator/hop-check.ts): the reduce-scatter's partial sums from
 * prev (`received`) and to next (`forwarded`), the chunk sum it formed (`owned`) and the one prev formed (`gathered`).
 */
export interface HopReport { received: SketchReport; forwarded: SketchReport; owned: SketchReport; gathered: SketchReport }
export const HOP_KEYS = ['received', 'forwarded', 'owned', 'gathered'] as const;
/**
 * A hearing's hop sketches (HopSketchesMessage): a HopReport and the all-gather's relays, what the member sent after its own
 * sums (`relayOut`), what it received after prev's (`relayIn`) and what it received but the last chunk (`relayed`).
 */
export interface RelayHopReport extends HopReport { relayOut: SketchReport; relayIn: SketchReport; relayed: SketchReport }
export const RELAY_HOP_KEYS = [...HOP_KEYS, 'relayOut', 'relayIn', 'relayed'] as const;
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
export type ErrorKind = 'bad-request' | 'unauthorized' | 'forbidden' | 'not-found' | 'method-not-allowed' | 'too-large' | 'unsupported-media-type'
  | 'conflict' | 'stale' | 'too-many-requests' | 'unavailable' | 'internal';
export const ERROR_KINDS: readonly ErrorKind[] = [
  'bad-request', 'unauthorized', 'forbidden', 'not-found', 'method-not-allowed', 'too-large', 'unsupported-media-type', 'conflict', 'stale',
  'too-many-requests', 'unavailable', 'internal',
];
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
  /** As StepAssignment.direct, for this ring. */
  direct?: DirectRoutes;
}

/**
 * The answer to a `claim`: the next chunk of the step's tail for this peer to add; empty: the
 * tail is gone (or the step is over). `last`: its final micro-batch (claim no more), sized to
 * the rate it computes at, to run with the all-reduce overlapped.
 */
export interface Grant { type: 'grant'; generation: number; step: number; ids: number[]; last?: true }

/**
 * A hearing (protocol 15): the members of a verified step `step` of `generation` hold different weights after it; each answers
 * with its contribution and hop records of that step sketched under `seed`, drawn now, after every value was sent.
 */
export interface HopSeed { type: 'hop-seed'; generation: number; step: number; seed: number }

export type CoordinatorMessage =
  | JoinAccept | StepAssignment | ErrorMessage | LoadState | UploadRequest | Done | Evicted | Evaluate | PrepareRing | Grant | HopSeed;

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
  | {
    type: 'step'; step: number; generation: number; loss: number | null; imagesPerSec: number; peers: number; timings: PeerStepTiming[]; traffic?: StepTraffic;
    /** The ring's compute utilisation of the step (src/train/utilisation.ts) and its wall time (absent from older coordinators). */
    utilisation?: number; wallMs?: number;
  }
  | { type: 'step-aborted'; step: number; generation: number; reason: string }
  | ({ type: 'eval' } & EvalSummary)
  | { type: 'checkpoint'; step: number }
  | { type: 'done'; step: number }
  /** The job paused itself: the same failure ended peers' work again and again with no step committed (src/client/failure-streak.ts). */
  | { type: 'halted'; step: number; reason: string }
  /** A job with syncEvery "auto" changed H (coordinator/sync-auto.ts). */
  | ({ type: 'sync' } & SyncChoice)
  /** A job that verifies its steps: what its audits found so far (coordinator/audits.ts). */
  | ({ type: 'verification' } & VerificationTally);

/**
 * What a verifying job's audits found up to `step` (numbered from 1): slices recomputed by another
 * member (`audits`; `auditedImages` of the `computedImages` its verified steps computed is their
 * cost), disagreements settled by a second auditor (`disputes`) and peers convicted (`caught`).
 * `directed`: of the audits, those given to suspects (absent from older coordinators). `convicted` and
 * `reason`: the peers (names, else ids) convicted in this record, and why.
 */
export interface VerificationTally {
  step: number; audits: number; caught: number; disputes: number; auditedImages: number; computedImages: number; directed?: number;
  convicted?: string[]; reason?: string;
}

/**
 * A change of H by a job with syncEvery "auto" (coordinator/sync-auto.ts): from the step after
 * `step` (numbered from 1) the ring runs rounds of `h` inner steps (1: every step synchronised).
 * `share`: the part of a sync step spent not computing; `computeMs` and `syncMs`: the measured
 * compute per inner step and cost per synchronisation it was chosen from.
 */
export interface SyncChoice { step: number; from: number; h: number; share: number; computeMs: number; syncMs: number; reason: string }

/** One line of a job's metrics (metrics.jsonl; GET /api/metrics answers { records: MetricRecord[] }). */
export type MetricRecord =
  | { type: 'step'; time: number; step: number; generation: number; ring: number; loss: number | null; imagesPerSec: number; wallMs: number;
    peers: (PeerStepTiming & { checksum: string })[]; traffic?: StepTraffic;
    /** Digest of the step's committed sample ids (slice-rerun.ts sampleDigest): a re-run commits the same. */
    samples?: string;
    /** The ring's compute utilisation of the step: sum of computeMs / (ring x wallMs) (src/train/utilisation.ts). */
    utilisation?: number }
  /** formedAgain: the same ring formed again after a link lost as it formed (coordinator/blame.ts formAgain), nobody left. */
  | { type: 'abort'; time: number; step: number; generation: number; reason: string; formedAgain?: true }
  | ({ type: 'eval'; time: number } & EvalSummary)
  | { type: 'checkpoint'; time: number; step: number }
  | { type: 'generation'; time: number; generation: number; ring: string[]; peers?: RingPeer[]; topology?: Topology }
  | { type: 'done'; time: number; step: number }
  | { type: 'halted'; time: number; step: number; reason: string }
  | ({ type: 'sync'; time: number } & SyncChoice)
  | ({ type: 'verification'; time: number } & VerificationTally);

/**
 * An evaluation of the weights after `step` updates: over `samples` test images (`final`: the
 * job's last, on the whole test split); the confusion matrix (row-major, rows the true class)
 * and the predictions for the dashboard's grid where the peers reported them.
 */
export interface EvalSummary {
  step: number; top1: number; top5: number; loss: number; samples: number; final?: boolean; confusion?: number[]; predictions?: EvalPrediction[];
}

/** A ring member as the dashboard draws it. */
export interface RingPeer { id: string; name: string | null; device: string; /** The key its work is credited to (coordinator/credit.ts). */ donor?: string }

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
  /** Of `images`, those it was granted from the step's tail (StepResult.claimed). */
  claimed?: number;
  /** How long the peer's step waited for its images (StepTimings.dataMs). */
  dataMs?: number;
  /** The all-reduce not hidden behind backward (StepTimings.exposedCommMs). */
  exposedCommMs?: number;
  /** Neither compute nor exposed communication (StepTimings.overheadMs). */
  overheadMs?: number;
  /** The peer's running total of shard bytes downloaded (StepResult.fetchedBytes). */
  fetchedBytes?: number;
  /** The most images the peer computes at once (StepResult.microBatch): a larger share ran in micro-batches. */
  microBatch?: number;
}
