// The volunteer's shared shapes: what a platform gives it (a compute engine, WebRTC, a WebSocket,
// a decoder, optional caches), its options, the events it reports and how it exits; and the
// context its parts share (volunteer.ts builds it once per job, the session and its trainer
// read it).
import type { Adversary, AdversaryKind } from '../trust/adversary.ts';
import type { IceReport } from '../comm/ice-check.ts';
import type { PeerCtor } from '../comm/index.ts';
import type { PeerLike } from '../comm/peerjs-peer.ts';
import type { Gunzip } from '../data/bytes.ts';
import type { Decoder } from '../data/image.ts';
import type { CountingSource } from '../data/counting-source.ts';
import type { BatchLoader } from '../data/loader.ts';
import type { Prefetcher } from '../data/prefetch.ts';
import type { ShardSource } from '../data/source.ts';
import type { AnyEngine } from '../backend/engine.ts';
import type { MicroFit } from '../nn/fit.ts';
import type { Model } from '../nn/model.ts';
import type { GradBucket } from '../nn/buckets.ts';
import type { WireFormat } from '../protocol/frames.ts';
import type { PublicJob } from './http.ts';
import { MAX_BATCH, type IceServer } from '../protocol/messages.ts';
import type { RoundState } from './rounds.ts';
import type { TrainingState } from './state.ts';
import type { StepPhase } from './step-machine.ts';

/** The parts of a WebSocket the session uses (browser WebSocket, or `ws` in Node). */
export interface SocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(text: string): void;
  close(): void;
}
export type SocketCtor = new (url: string) => SocketLike;

export interface VolunteerPlatform {
  /** The compute backend (WebGPU or wasm: src/client/backend-choice.ts picks one). */
  engine: AnyEngine;
  Peer: PeerCtor;
  /** The base RTC configuration; the job's ICE servers (join answer) are added to it. */
  rtcConfig: RTCConfiguration;
  /** The RTC configuration for the job's ICE servers, where the platform needs its own (Node: nodeRtcConfig). */
  rtcConfigFor?: (iceServers: IceServer[]) => RTCConfiguration;
  /** Gathers this device's WebRTC candidates (ice-check.ts): says why no neighbour could be reached. */
  iceCheck?: (config: RTCConfiguration) => Promise<IceReport>;
  WebSocket: SocketCtor;
  decoder: Decoder;
  gunzip?: Gunzip;
  fetch?: typeof fetch;
  /** Where a shard source gets a cache in front (the page: IndexedDB). */
  cacheShards?: (source: ShardSource, dataset: string) => ShardSource;
  /** Keeps the job's newest checkpoint on this device (the page: IndexedDB) for a fast rejoin. */
  checkpoints?: CheckpointKeeper;
  /** Direct ring links to other Node volunteers (Node: src/comm/direct-peer.ts); absent: WebRTC only. */
  direct?: DirectLinks;
}

/** A listener for direct links: its port goes in the join; each session's Peer is wrapped with the secret the join answer gave. */
export interface DirectLinks {
  readonly port: number;
  /** The addresses it listens on (the coordinator routes others to it only when its join came from one). */
  readonly addresses: readonly string[];
  wrap(peer: PeerLike, secret: string, log: (line: string) => void): PeerLike;
}

export interface CheckpointKeeper {
  get(job: string, step: number): Promise<Uint8Array | null>;
  /** Keeps it; false when the device had no room (a rejoin downloads it again). */
  keep(job: string, step: number, bytes: Uint8Array): Promise<boolean>;
}

export type VolunteerEvent =
  | { type: 'joined'; peerId: string; job: PublicJob }
  | { type: 'state'; step: number; source: 'seed' | 'checkpoint' }
  | {
    type: 'step'; step: number; generation: number; ringSize: number; images: number; loss: number | null; computeMs: number; commMs: number;
    innerSteps: number; sentBytes: number; dataMs: number; fetchedBytes: number;
  }
  | { type: 'left'; reason: string }
  /** The step's state machine took a transition (step-machine.ts); `step` is 0-based, as in assignments. */
  | { type: 'phase'; from: StepPhase; to: StepPhase; step: number };

export interface VolunteerOptions {
  /** The coordinator, e.g. http://lab-server:8080 */
  url: string;
  token?: string;
  /** What the dashboard and the credit board show (src/protocol/messages.ts DONOR_NAME). */
  name?: string;
  /** The donor's lasting id (a browser's, kept in IndexedDB): its work is credited to it across visits. */
  donor?: string;
  log?: (line: string) => void;
  onEvent?: (e: VolunteerEvent) => void;
  /** After losing the coordinator, keep trying to rejoin for this long (default 10 minutes). */
  rejoinForMs?: number;
  /** Stops after the current message when aborted. */
  signal?: AbortSignal;
  /** Share of this device to use, in (0, 1]: each step idles (1/share - 1) times its compute time. */
  throttle?: () => number;
  /**
   * A ring neighbour silent this long is gone (default 120 s). Peers that leave are noticed by
   * the coordinator through their session at once; this only catches a hung neighbour, and a
   * neighbour busy with a long GPU step must not be mistaken for one.
   */
  deadAfterMs?: number;
  /**
   * Bytes of parsed shards kept in memory, training and validation together (default 512 MiB;
   * validation gets a quarter). Smaller than the data set (ImageNet): least recently used out.
   */
  memoryCacheBytes?: number;
  /** Load the next step's batch while this one computes (default true). */
  prefetch?: boolean;
  /**
   * Benchmarks only: a straggler of mean `straggle` (> 0). Each sync step draws an exponential
   * factor X of that mean and computes 1 + X times slower (it waits X times the expected compute
   * before each batch it computes), the scaling simulator's straggler model (bench/scaling-sim.ts).
   */
  straggle?: number;
  /** The attack tests and bench only (issue 46): a dishonest donor's way with its gradient (src/trust/adversary.ts). */
  adversary?: AdversaryKind;
  /** The attack bench only: the adversary also audits as it cheats (src/trust/adversary.ts). */
  collude?: boolean;
  /**
   * The engine memory this volunteer may use, in bytes (absent: the engine's own limit; WebGPU,
   * whose devices do not say, src/nn/fit.ts DEFAULT_GPU_BUDGET). Slices larger than fits run in micro-batches.
   */
  memoryBytes?: number;
  /** The most images it computes at once, whatever the memory (absent: as many as fit). */
  microBatch?: number;
}

export interface VolunteerExit { reason: 'done' | 'stopped'; step: number | null }

/** What the parts of a running volunteer share: the platform, the options, the job and its model, state and data. */
export interface Ctx {
  p: VolunteerPlatform;
  o: VolunteerOptions;
  base: string;
  fetchFn: typeof fetch;
  log: (line: string) => void;
  job: PublicJob;
  model: Model;
  /** The sync step's gradient buckets (sync-step.ts syncBuckets): the same on every peer of the job. */
  buckets: GradBucket[];
  /** The job's all-reduce wire format (sync-step.ts jobWire): every collective of every ring sends it. */
  wire: WireFormat;
  state: TrainingState;
  /** The round machinery of a job with syncEvery > 1 (null: exact sync SGD). */
  rounds: RoundState | null;
  train: BatchLoader;
  val: BatchLoader;
  /** Training batches, loaded ahead where an assignment announces them. */
  batches: Prefetcher;
  prefetch: boolean;
  /** The HTTP shard source under any cache: its byte count is this peer's download. */
  fetched: CountingSource;
  /** How many images this device computes at once (src/nn/fit.ts): larger slices run as micro-batches. */
  fit: MicroFit;
  /** The data set's number of classes. */
  classes: number;
  /** The attack tests and bench only: the dishonest behaviour of `o.adversary` (null: an honest volunteer). */
  adversary: Adversary | null;
}

/** How a session ended (Session.run). */
export type SessionEnd = {
  reason: 'done' | 'stopped' | 'lost' | 'evicted'; detail: string; unreachable?: boolean;
  /** This peer's own work failed (detail: the error), as opposed to a lost coordinator or an eviction. */
  failed?: boolean;
};

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The micro-batch this volunteer says it computes at (JoinRequest.microBatch, StepResult.microBatch): no slice is larger than MAX_BATCH. */
export const declaredMicroBatch = (fit: Pick<MicroFit, 'images'>): number => Math.min(fit.images, MAX_BATCH);
