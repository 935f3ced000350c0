// The volunteer: the same client in a browser worker and in Node (headless lab desktops).
// It joins the coordinator's job, then obeys the session: load the state of a step (seed or
// checkpoint), and for each step assignment compute its slice's gradient, sum it with the
// ring over WebRTC bucket by bucket as backward produces it (src/client/sync-step.ts), apply
// LARS and report loss, timings and a checksum of the new weights.
//
// A step is undoable: the state is backed up before each step, and when the
// coordinator re-runs step s (a peer failed while some of us had already applied s), the
// backup is restored first. An assignment of a newer generation closes the ring at once, so a
// collective stuck on a dead peer ends when the coordinator has decided what happens next.
// A lost peer costs its slice, not the step: before each bucket's all-reduce (which sums in
// place) the peer copies that bucket of its slice's gradient sum, the whole copy keyed by
// (step, generation, ids); a re-run whose assignment names that key in `reuse` adds the copy
// and computes only the extra ids.
//
// Data comes ahead of need (src/data/prefetch.ts): an assignment's batch starts loading when it
// arrives (while the ring forms), and the slice of the next step it announces (`next`, or a
// round's next inner step) loads while this one computes and all-reduces.
import { formStepRings, type StepRings } from './step-rings.ts';
import type { IceReport } from '../comm/ice-check.ts';
import { MAX_UNREACHABLE, reportIce, unreachableError } from './reachability.ts';
import { relayHostsOf } from '../comm/route.ts';
import { isRingError, openEndpoint, type PeerCtor, type PeerEndpoint } from '../comm/index.ts';
import { RoundState } from './rounds.ts';
import type { Gunzip } from '../data/bytes.ts';
import type { Decoder } from '../data/image.ts';
import { countingSource, type CountingSource } from '../data/counting-source.ts';
import { BatchLoader, DEFAULT_CACHE_BYTES, defaultAugment } from '../data/loader.ts';
import { Prefetcher } from '../data/prefetch.ts';
import { httpShardSource, loadManifest, type ShardSource } from '../data/source.ts';
import type { AnyEngine, TensorLike } from '../backend/engine.ts';
import { Model } from '../nn/model.ts';
import { modelByName } from '../nn/models.ts';
import { evaluate } from '../train/evaluate.ts';
import { recordGradients, uploadBatch } from '../train/step.ts';
import type { GradBucket } from '../nn/buckets.ts';
import { weightChecksum } from './checksum.ts';
import { GRADIENT_BOUND, checkRingStep, perImageRms, roundRingStep, syncBuckets, syncGradients, usableKept, type KeptSum } from './sync-step.ts';
import { CoordinatorError, downloadCheckpoint, getJob, join, uploadCheckpoint, type PublicJob } from './http.ts';
import {
  PROTOCOL_VERSION, SESSION_PATH, decodeCoordinatorMessage, describe, parseJsonText,
  type CoordinatorMessage, type EvalCounts, type Evaluate, type IceServer, type JoinAccept, type LinkKind, type LoadState, type NextSlice, type PeerMessage, type RoundAssignment, type StepAssignment, type StepTimings,
} from './protocol.ts';
import { StateError, TrainingState } from './state.ts';

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
}

export interface CheckpointKeeper {
  get(job: string, step: number): Promise<Uint8Array | null>;
  /** Keeps it; false when the device had no room (a rejoin downloads it again). */
  keep(job: string, step: number, bytes: Uint8Array): Promise<boolean>;
}

export type VolunteerEvent =
  | { type: 'joined'; peerId: string; job: PublicJob }
  | { type: 'state'; step: number; source: 'seed' | 'checkpoint' }
  | { type: 'step'; step: number; generation: number; ringSize: number; images: number; loss: number | null; computeMs: number; commMs: number; innerSteps: number; sentBytes: number; dataMs: number; fetchedBytes: number }
  | { type: 'left'; reason: string };

export interface VolunteerOptions {
  /** The coordinator, e.g. http://lab-server:8080 */
  url: string;
  token?: string;
  name?: string;
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
}

export interface VolunteerExit { reason: 'done' | 'stopped'; step: number | null }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MAX_MS = 86_400_000;
const clampMs = (ms: number): number => Math.min(MAX_MS, Math.max(0, ms));
/** A volunteer stopped mid-step waits at most this long for its step to commit (stop()). */
export const LEAVE_AFTER_STEP_MS = 15_000;
export { usableKept };

/** Joins the job at `url` and trains until the job is done (or `signal` aborts). */
export async function runVolunteer(p: VolunteerPlatform, o: VolunteerOptions): Promise<VolunteerExit> {
  const fetchFn = p.fetch ?? fetch;
  const base = o.url.replace(/\/+$/, '');
  const log = o.log ?? (() => undefined);
  const rejoinFor = o.rejoinForMs ?? 600_000;
  const job = await withRetry(() => getJob(fetchFn, base), rejoinFor, log, o.signal);
  // Counted below any cache: what this peer downloaded from the coordinator.
  const fetched = countingSource(httpShardSource(`${base}/data/${job.job.dataset}/`, fetchFn));
  const source = p.cacheShards ? p.cacheShards(fetched, job.job.dataset) : fetched;
  const manifest = await loadManifest(source);
  const { channels, height, width } = manifest.image;
  const spec = modelByName(job.job.model, [channels, height, width], manifest.classes.length);
  const model = new Model(p.engine, spec, { seed: job.job.seed });
  const buckets = syncBuckets(model.layout, job.job);
  const outer = job.job.outer && job.job.outer.syncEvery > 1 ? job.job.outer : null;
  const state = new TrainingState(model, job.job.optimizer, outer);
  const rounds = outer ? new RoundState(state, outer) : null;
  const memory = o.memoryCacheBytes ?? DEFAULT_CACHE_BYTES;
  if (!(memory > 0)) throw new RangeError(`memoryCacheBytes must be > 0, got ${memory}`);
  const valBytes = Math.max(1, Math.floor(memory / 4));
  const loader = (split: 'train' | 'val', cacheBytes: number) => new BatchLoader({ manifest, source, decoder: p.decoder, split, augment: defaultAugment(manifest, split), seed: job.job.seed, gunzip: p.gunzip, cacheBytes });
  const train = loader('train', Math.max(1, memory - valBytes));
  const batches = new Prefetcher(train, {
    onError: (e, ids) => log(`volunteer: loading ${ids.length} images ahead failed (${e instanceof Error ? e.message : String(e)}); the step will load them itself`),
  });
  const ctx: Ctx = { p, o, base, fetchFn, log, job, model, buckets, state, rounds, train, val: loader('val', valBytes), batches, prefetch: o.prefetch ?? true, fetched };
  let step: number | null = null;
  let unreachable = 0;
  let checkedIce = false;
  try {
    for (;;) {
      if (o.signal?.aborted) return { reason: 'stopped', step };
      let session: Session;
      try {
        session = await withRetry(() => Session.open(ctx), rejoinFor, log, o.signal);
      } catch (e) {
        if (o.signal?.aborted) return { reason: 'stopped', step };
        throw e;
      }
      // Once, in the background: what this device offers WebRTC, and any server that failed.
      if (!checkedIce && p.iceCheck && session.iceServers.length) checkedIce = reportIce(p.iceCheck, session.iceServers, session.rtcConfig, log);
      const end = await session.run();
      step = session.committed;
      if (end.reason === 'done' || end.reason === 'stopped') return { reason: end.reason, step };
      // A step's staged backward may outlive its session: the next session uses the model after it.
      await session.drained(60_000);
      // Evicted again and again because no neighbour could be reached: rejoining will not help.
      unreachable = end.unreachable ? (session.linked ? 1 : unreachable + 1) : 0;
      if (unreachable >= MAX_UNREACHABLE) throw await unreachableError(p, session.iceServers, session.rtcConfig, end.detail, log);
      o.onEvent?.({ type: 'left', reason: end.detail });
      log(`volunteer: session ended (${end.detail}); rejoining`);
      await sleep(500);
    }
  } finally {
    state.destroy();
    model.destroy();
  }
}

/**
 * The largest RMS a received segment of a round's sum may have: GRADIENT_BOUND times the
 * round's images times this peer's own per-image change RMS (none when it computed nothing).
 */
function changeBound(change: Float32Array, images: number, roundImages: number): number {
  const perImage = perImageRms(change, images);
  return perImage === null ? Number.POSITIVE_INFINITY : GRADIENT_BOUND * roundImages * perImage;
}

/**
 * The slices to load while inner step `k` of a round computes: the next two inner steps with
 * images, then the next step the assignment announces. k = -1: from the first.
 */
function innerAhead(a: StepAssignment, plan: RoundAssignment, k: number, count = 2): NextSlice[] {
  const out: NextSlice[] = [];
  for (let j = k + 1; j < plan.ids.length && out.length < count; j++) {
    const ids = plan.ids[j]!;
    if (ids.length) out.push({ step: a.step + j, epoch: plan.epochs[j]!, sampleIds: ids });
  }
  if (out.length < count && a.next) out.push(a.next);
  return out;
}

/** The device a peer reports (shown on the dashboard's ring): backend and device. */
export function deviceLabel(e: AnyEngine): string {
  return `${e.info.backend}: ${e.info.description}`.slice(0, 200);
}

/** Retries `f` while the coordinator is unreachable or restarting, for up to `forMs`. */
async function withRetry<T>(f: () => Promise<T>, forMs: number, log: (l: string) => void, signal?: AbortSignal): Promise<T> {
  const until = Date.now() + forMs;
  for (let wait = 250; ; wait = Math.min(wait * 2, 4000)) {
    try {
      return await f();
    } catch (e) {
      // 4xx are answers (wrong token, bad request): retrying will not change them, except
      // 429 (too many joins from this address, e.g. a lab behind one NAT): wait and retry.
      const status = (e as { status?: number }).status ?? 0;
      if ((status >= 400 && status < 500 && status !== 429) || Date.now() + wait > until || signal?.aborted) throw e;
      log(`volunteer: ${e instanceof Error ? e.message : String(e)}; retrying in ${wait} ms`);
      await sleep(wait);
    }
  }
}

interface Ctx {
  p: VolunteerPlatform;
  o: VolunteerOptions;
  base: string;
  fetchFn: typeof fetch;
  log: (line: string) => void;
  job: PublicJob;
  model: Model;
  /** The sync step's gradient buckets (sync-step.ts syncBuckets): the same on every peer of the job. */
  buckets: GradBucket[];
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
}

type SessionEnd = { reason: 'done' | 'stopped' | 'lost' | 'evicted'; detail: string; unreachable?: boolean };

/** One membership of the job: a join, its session socket, its signaling endpoint and rings. */
class Session {
  /** The step whose weights this peer holds (committed or tentatively applied), null until loaded. */
  committed: number | null = null;
  /** The step the GPU backup was taken before. */
  private backedUp: number | null = null;
  private ring: StepRings | null = null;
  /** Set while a ring is being formed: gives up on it (a newer assignment came, or the session ended). */
  private supersede: (() => void) | null = null;
  /** The pump's current run over the queue. */
  private pumping: Promise<void> = Promise.resolve();
  private readonly queue: CoordinatorMessage[] = [];
  private busy = false;
  private endWith: ((e: SessionEnd) => void) | null = null;
  private ended = false;
  private endReason: SessionEnd | null = null;
  private lastReportAt = 0;
  private x: TensorLike | null = null;
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  /** Stopped mid-step: the bound on waiting for the coordinator to let it go (stop()). */
  private leaving: ReturnType<typeof setTimeout> | null = null;
  /** Running per-image RMS of this peer's gradient, per bucket (the all-reduce's bound, sync-step.ts rmsBound). */
  private readonly gradRms: (number | null)[] = [];
  /** How the links to the ring successor and from the predecessor run (null: unknown). */
  private links: { next: LinkKind | null; prev: LinkKind | null } = { next: null, prev: null };
  /** True once a ring with neighbours formed in this session. */
  linked = false;
  /** Milliseconds the current step (or round) waited for its batches. */
  private dataMs = 0;
  /** The gradient sum of this peer's last sync slice, copied before its all-reduce (null: none). */
  private kept: KeptSum | null = null;

  private constructor(private readonly c: Ctx, private readonly accept: JoinAccept, private readonly endpoint: PeerEndpoint, private readonly ws: SocketLike, readonly rtcConfig: RTCConfiguration) {
    // The coordinator may speak first (load-state at once): listen from the moment the
    // socket is open; messages wait in the queue until run() starts the pump.
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = (ev) => {
      const why = `the coordinator closed the session (${ev.code ?? ''} ${ev.reason ?? ''})`.trim();
      if (this.onEarlyClose) this.onEarlyClose(why);
      else this.end({ reason: 'lost', detail: why });
    };
    ws.onerror = () => undefined; // a close follows
  }

  /** Set while the socket is opening: a close then fails the open. */
  onEarlyClose: ((why: string) => void) | null = null;

  static async open(c: Ctx): Promise<Session> {
    const body = { type: 'join' as const, protocol: PROTOCOL_VERSION, ...(c.o.token ? { token: c.o.token } : {}), ...(c.o.name ? { name: c.o.name } : {}) };
    const accept = await join(c.fetchFn, c.base, body);
    const url = new URL(c.base);
    const rtcConfig = c.p.rtcConfigFor ? c.p.rtcConfigFor(accept.iceServers) : { ...c.p.rtcConfig, iceServers: [...(c.p.rtcConfig.iceServers ?? []), ...accept.iceServers] };
    const endpoint = await openEndpoint({
      Peer: c.p.Peer, id: accept.peerId, token: accept.signalingToken, rtcConfig,
      server: { host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), path: accept.signalingPath, secure: url.protocol === 'https:' },
    });
    const wsUrl = `${url.protocol === 'https:' ? 'wss' : 'ws'}://${url.host}${SESSION_PATH}?peer=${encodeURIComponent(accept.peerId)}&token=${encodeURIComponent(accept.signalingToken)}`;
    const ws = new c.p.WebSocket(wsUrl);
    // Listen before the socket opens: the coordinator speaks first, and its first message can
    // arrive in the same read as the handshake (before an await after 'open' would resume).
    const session = new Session(c, accept, endpoint, ws, rtcConfig);
    try {
      await new Promise<void>((resolve, reject) => {
        ws.onopen = () => resolve();
        session.onEarlyClose = (why) => reject(new Error(`the session socket ${SESSION_PATH} did not open: ${why}`));
      });
    } catch (e) {
      endpoint.destroy();
      throw e;
    }
    session.onEarlyClose = null;
    c.log(`volunteer: joined as ${accept.peerId}`);
    c.o.onEvent?.({ type: 'joined', peerId: accept.peerId, job: c.job });
    return session;
  }

  get peerId(): string {
    return this.accept.peerId;
  }

  get iceServers(): IceServer[] {
    return this.accept.iceServers;
  }

  /** The job's key for the kept checkpoint (one per coordinator and job). */
  private get jobKey(): string {
    return `${this.c.base}#${this.c.job.jobId}`;
  }

  run(): Promise<SessionEnd> {
    const done = new Promise<SessionEnd>((resolve) => { this.endWith = resolve; });
    if (this.ended) return Promise.resolve(this.endReason!);
    this.pump();
    this.heartbeat = setInterval(() => this.send({ type: 'heartbeat', peerId: this.peerId, generation: this.ring?.generation ?? 0, step: this.committed ?? 0 }), this.accept.heartbeatMs);
    const onAbort = () => this.stop();
    this.c.o.signal?.addEventListener('abort', onAbort, { once: true });
    // Stopped while joining: the listener above came too late to hear it.
    if (this.c.o.signal?.aborted) onAbort();
    return done.finally(() => this.c.o.signal?.removeEventListener('abort', onAbort));
  }

  /**
   * Stopped by its owner. A member in the middle of a step finishes it first: it tells the
   * coordinator, which lets it go with 'done' once the step commits, so the ring neither aborts
   * nor re-runs its slice; it leaves anyway after LEAVE_AFTER_STEP_MS. Anyone else leaves now.
   */
  private stop(): void {
    if (this.ended || this.leaving) return;
    if (!this.ring || !this.busy) return this.end({ reason: 'stopped', detail: 'stopped' });
    this.c.log('volunteer: stopping after this step');
    this.send({ type: 'leave', peerId: this.peerId, reason: 'stopped by its owner', afterStep: true });
    this.leaving = setTimeout(() => this.end({ reason: 'stopped', detail: 'stopped' }), LEAVE_AFTER_STEP_MS);
  }

  private end(e: SessionEnd): void {
    if (this.ended) return;
    if (this.leaving) clearTimeout(this.leaving);
    // Say goodbye while send() still speaks: a normal leave, not a lost peer to blame.
    if (e.reason === 'stopped') this.send({ type: 'leave', peerId: this.peerId, reason: 'stopped by its owner' });
    this.ended = true;
    this.endReason = e;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.ring?.close();
    this.ring = null;
    this.supersede?.();
    this.endpoint.destroy();
    this.ws.onclose = null;
    this.ws.close();
    // A step still running uses the batch: the pump releases it when that step is done.
    if (!this.busy) this.releaseBatch();
    this.endWith?.(e);
  }

  private send(m: PeerMessage): void {
    if (!this.ended && this.ws.readyState === 1) this.ws.send(JSON.stringify(m));
  }

  private receive(data: unknown): void {
    const parsed = typeof data === 'string' ? parseJsonText(data) : typeof data === 'object' && data !== null && 'toString' in data ? parseJsonText(String(data)) : null;
    const d = parsed?.ok ? decodeCoordinatorMessage(parsed.value) : parsed;
    if (!d || !d.ok) {
      this.c.log(`volunteer: ignored a message from the coordinator: ${d ? describe(d.error) : 'not text'}`);
      return;
    }
    const m = d.value;
    // Preempt: a collective of an older generation cannot finish any more once the coordinator
    // moved on; closing the ring ends it now instead of at its timeout.
    const moves = m.type === 'load-state' || m.type === 'done' || m.type === 'evicted' || (m.type === 'step-assignment' && m.generation !== this.ring?.generation);
    if (moves && this.ring) {
      // A new generation keeps the links it shares with this one (released, not closed); a
      // reload, the end or an eviction ends them (end() closes whatever is left).
      if (m.type === 'step-assignment') this.ring.release();
      else this.ring.close();
      this.ring = null;
    }
    if (moves) this.supersede?.();
    this.queue.push(m);
    this.pump();
  }

  private releaseBatch(): void {
    const x = this.x;
    this.x = null;
    if (!x) return;
    // A step that outlived its session may end after the owner destroyed the engine (a volunteer
    // stopped mid-step): its memory went with the engine, and there is nothing left to release.
    try {
      this.c.p.engine.release(x);
    } catch (e) {
      this.c.log(`volunteer: the batch was not released (${e instanceof Error ? e.message : String(e)})`);
    }
  }

  /** Resolves once the message being handled is done (a step may outlive the session's end), or after `ms`. */
  drained(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => { timer = setTimeout(resolve, ms); });
    return Promise.race([this.pumping, late]).finally(() => clearTimeout(timer));
  }

  private pump(): void {
    if (this.busy || !this.endWith) return;
    this.busy = true;
    this.pumping = this.drain();
  }

  private async drain(): Promise<void> {
    try {
      while (!this.ended && this.queue.length) {
        const m = this.queue.shift()!;
        if (this.superseded(m)) {
          this.c.log(`volunteer: skipped step ${m.type === 'step-assignment' ? m.step + 1 : '?'} of an old generation (the coordinator has moved on)`);
          continue;
        }
        try {
          await this.handle(m);
        } catch (e) {
          const why = e instanceof Error ? e.message : String(e);
          this.c.log(`volunteer: ${m.type} failed: ${why}`);
          this.send({ type: 'leave', peerId: this.peerId, reason: why.slice(0, 900) });
          this.end({ reason: 'lost', detail: why });
        }
      }
    } finally {
      this.busy = false;
      if (this.ended) this.releaseBatch();
    }
  }

  /**
   * A step assignment with a newer one (or a reload, the end, an eviction) behind it in the
   * queue: the coordinator has abandoned that generation, so its ring would never form.
   */
  private superseded(m: CoordinatorMessage): boolean {
    if (m.type !== 'step-assignment') return false;
    return this.queue.some((n) => n.type === 'load-state' || n.type === 'done' || n.type === 'evicted' || (n.type === 'step-assignment' && n.generation > m.generation));
  }

  /** Forms the assignment's ring, or gives up (null) when a newer assignment arrives first. */
  private async formRing(a: StepAssignment): Promise<StepRings | null> {
    const formed = formStepRings(this.endpoint, a, { deadAfterMs: this.c.o.deadAfterMs ?? 120_000, stallTimeoutMs: 120_000 });
    const superseded = new Promise<null>((resolve) => { this.supersede = () => resolve(null); });
    try {
      const ring = await Promise.race([formed, superseded]);
      if (ring === null) {
        // Its neighbours have moved on too; release it if it forms after all (the endpoint's pool
        // keeps its links for a newer ring of the same neighbours, else closes them).
        formed.then((late) => late.release(), () => undefined);
        this.c.log(`volunteer: gave up forming the ring of generation ${a.generation} (the coordinator has moved on)`);
      }
      return ring;
    } finally {
      this.supersede = null;
    }
  }

  private async handle(m: CoordinatorMessage): Promise<void> {
    switch (m.type) {
      case 'load-state': return this.loadState(m);
      case 'step-assignment': return this.step(m);
      case 'evaluate': return this.evaluate(m);
      case 'upload-checkpoint':
        this.undoApplied(m.step);
        this.requireStep(m.step, 'upload');
        return this.upload(m.step);
      case 'done':
        if (this.leaving) return this.end({ reason: 'stopped', detail: `stopped after step ${m.step}` });
        this.c.log(`volunteer: job done at step ${m.step} (${m.reason})`);
        return this.end({ reason: 'done', detail: m.reason });
      case 'evicted':
        return this.end({ reason: 'evicted', detail: `evicted: ${m.reason}`, unreachable: m.cause === 'unreachable' });
      case 'error':
        this.c.log(`volunteer: the coordinator refused a message: ${m.message}`);
        return;
      case 'join-accept':
        return;
    }
  }

  private requireStep(step: number, what: string): void {
    if (this.committed !== step) throw new StateError(`asked to ${what} the weights of step ${step}, this peer holds step ${this.committed ?? 'none'}`);
  }

  private async loadState(m: LoadState): Promise<void> {
    const { state } = this.c;
    if (m.source === 'seed') state.reset(this.c.job.job.seed);
    else {
      const keeper = this.c.p.checkpoints;
      const kept = await keeper?.get(this.jobKey, m.step);
      let file = kept ?? (await downloadCheckpoint(this.c.fetchFn, this.c.base, m.step));
      try {
        state.load(file, m.step);
      } catch (e) {
        if (!kept) throw e;
        // The kept copy is unusable (another model, damaged): fetch it from the coordinator.
        file = await downloadCheckpoint(this.c.fetchFn, this.c.base, m.step);
        state.load(file, m.step);
      }
      if (!kept && keeper) await this.keep(keeper, m.step, file);
    }
    this.committed = m.step;
    this.backedUp = null;
    this.kept = null;
    this.c.rounds?.forget();
    const checksum = weightChecksum(state.w);
    this.c.o.onEvent?.({ type: 'state', step: m.step, source: m.source });
    this.send({ type: 'ready', peerId: this.peerId, step: m.step, checksum, device: deviceLabel(this.c.p.engine) });
  }

  private async keep(keeper: CheckpointKeeper, step: number, file: Uint8Array): Promise<void> {
    if (!(await keeper.keep(this.jobKey, step, file))) this.c.log(`volunteer: no room on this device to keep the checkpoint of step ${step} (a rejoin will download it)`);
  }

  /** Uploads the weights of `step`. A refusal is logged, not fatal: the coordinator decides what follows. */
  private async upload(step: number, generation = this.ring?.generation ?? 0): Promise<void> {
    const file = await this.c.state.toCheckpoint(step, generation, { job: this.c.job.job.name, peer: this.peerId });
    try {
      await uploadCheckpoint(this.c.fetchFn, this.c.base, this.peerId, this.accept.signalingToken, step, file);
      if (this.c.p.checkpoints) await this.keep(this.c.p.checkpoints, step, file);
    } catch (e) {
      if (!(e instanceof CoordinatorError)) throw e;
      this.c.log(`volunteer: ${e.message}`);
    }
  }

  private async evaluate(m: Evaluate): Promise<void> {
    this.requireStep(m.step, 'evaluate');
    const counts: EvalCounts = { samples: 0, top1: 0, top5: 0, lossSum: 0 };
    if (m.ids.length) {
      const r = await evaluate(this.c.model, this.c.val, m.ids, Math.min(m.ids.length, 64), { confusion: m.confusion === true, show: m.show ?? [] });
      counts.samples = r.samples;
      counts.top1 = Math.round(r.top1 * r.samples);
      counts.top5 = Math.round(r.top5 * r.samples);
      counts.lossSum = Number.isFinite(r.loss) ? Math.max(0, r.loss * r.samples) : 0;
      if (r.confusion) counts.confusion = r.confusion;
      if (r.predictions?.length) counts.predictions = r.predictions;
    }
    this.send({ type: 'eval-result', peerId: this.peerId, step: m.step, counts });
  }

  /** Undoes a step (or round) this peer applied before the coordinator aborted it. */
  private undoApplied(step: number): void {
    if (this.c.rounds?.undo(step)) this.committed = step;
    else if (this.backedUp === step && this.committed === step + 1) {
      this.c.state.restore();
      this.committed = step;
    }
  }

  /** The assignment's ring (formed now if needed); null when superseded or failed (reported). */
  private async joinRing(a: StepAssignment): Promise<StepRings | null> {
    if (this.ring) return this.ring;
    let ring: StepRings | null;
    try {
      ring = await this.formRing(a);
    } catch (e) {
      this.ringFailed(e, a);
      return null;
    }
    if (!ring) return null;
    this.ring = ring;
    if (ring.size > 1) {
      this.linked = true;
      const relays = relayHostsOf(this.accept.iceServers);
      const [next, prev] = await Promise.all([ring.next?.route?.(relays), ring.prev?.route?.(relays)]);
      // A newer assignment may have closed this ring while its links were looked at.
      if (this.ring !== ring) {
        this.c.log(`volunteer: the ring of generation ${a.generation} was closed as it formed (the coordinator has moved on)`);
        return null;
      }
      this.links = { next: next ?? null, prev: prev ?? null };
      this.c.log(`volunteer: ring of ${ring.size}: link to ${ring.next?.remoteId ?? '?'} ${next ?? 'unknown'}, from ${ring.prev?.remoteId ?? '?'} ${prev ?? 'unknown'}`);
      this.c.log(`volunteer: ring of generation ${a.generation}: ${ring.links.reused} links reused, ${ring.links.total - ring.links.reused} new`);
    }
    return ring;
  }

  /**
   * The gradient SUM of one slice (and its loss sum); the optimiser runs on the host, so it
   * always comes back. `ahead`: the slices to load while this one computes, nearest first.
   */
  private async gradient(ids: number[], epoch: number, seed: number, step: number, ahead: readonly NextSlice[]): Promise<{ grads: Float32Array; lossSum: number }> {
    const { model } = this.c;
    const engine = this.c.p.engine;
    let lossSum = 0;
    if (ids.length > 0) {
      const x = await this.loadBatch(ids, epoch, ahead);
      const total = recordGradients(model, x, seed * 1_000_003 + step, this.c.job.job.labelSmoothing ?? 0);
      engine.flush();
      lossSum = (await engine.readF32(total))[0]!;
    } else {
      model.zeroGrads();
    }
    return { grads: await engine.readF32(model.grads), lossSum };
  }

  /** The batch of a slice on the engine (the wait for it counted in dataMs); then starts loading `ahead` (as far as the prefetcher's bound allows). */
  private async loadBatch(ids: number[], epoch: number, ahead: readonly NextSlice[]): Promise<TensorLike> {
    const taken = await this.c.batches.take(ids, epoch);
    this.dataMs += taken.waitMs;
    if (this.c.prefetch) for (const s of ahead) this.c.batches.hint(s.sampleIds, s.epoch);
    this.x = uploadBatch(this.c.model, taken.batch, this.x);
    return this.x;
  }

  /** Throttle: idle in proportion to the work, counted as compute so the coordinator gives this peer a smaller share. */
  private async throttle(computeMs: number): Promise<void> {
    const share = Math.min(1, Math.max(0.05, this.c.o.throttle?.() ?? 1));
    if (share < 1) await sleep(computeMs * (1 / share - 1));
  }

  private async step(a: StepAssignment): Promise<void> {
    if (a.round) {
      if (!this.c.rounds) throw new StateError('the coordinator assigned a round, but this job synchronises every step (syncEvery 1)');
      return this.round(a, a.round, this.c.rounds);
    }
    const arrived = performance.now();
    const { state } = this.c;
    // Start loading this step's batch while the ring forms (a no-op when prefetched already).
    this.dataMs = 0;
    if (this.c.prefetch) this.c.batches.hint(a.sampleIds, a.epoch);
    // Undo a step this peer applied (or began) before the coordinator aborted it.
    if (this.backedUp === a.step && (this.committed === a.step + 1 || this.committed === a.step)) {
      state.restore();
      this.committed = a.step;
    }
    this.requireStep(a.step, 'train');
    checkRingStep(a);
    state.backup();
    this.backedUp = a.step;
    // The ring forms while this peer computes: a slice whose ring never forms (a newer
    // generation came first) is still computed and kept, for the re-run to add.
    const forming = this.joinRing(a);
    // Awaited below; this only keeps a failure from going unhandled while the compute throws.
    forming.catch(() => undefined);
    // Before the compute (which updates the BN statistics): the checkpoint holds the state of a.step.
    if (a.uploadCheckpoint) await this.upload(a.step, a.generation);
    // Compute: this slice's gradient SUM, each bucket summed with the other slices over the ring
    // as soon as backward produced it (sync-step.ts); on a re-run, only the ids beyond the sum
    // this peer kept from the aborted attempt (when it holds it).
    const t0 = performance.now();
    const images = a.sampleIds.length;
    const reusable = usableKept(this.kept, a);
    const reused = reusable ? reusable.ids.length : 0;
    const todo = reused > 0 ? a.sampleIds.slice(reused) : a.sampleIds;
    if (a.reuse && !reusable) this.c.log(`volunteer: step ${a.step + 1} holds no kept sum of generation ${a.reuse.generation} for its ${a.reuse.count} ids: computing the whole slice`);
    this.c.log(`volunteer: step ${a.step + 1} computes ${todo.length} of ${images} images (${reused} reused)`);
    const x = todo.length > 0 ? await this.loadBatch(todo, a.epoch, a.next ? [a.next] : []) : null;
    const uploadMs = performance.now() - t0 - this.dataMs;
    const { buckets, model } = this.c;
    const out = await syncGradients({ model, x, stepSeed: a.seed * 1_000_003 + a.step, labelSmoothing: this.c.job.job.labelSmoothing ?? 0, buckets, reused: reusable }, forming, {
      step: a.step, images, globalBatch: a.globalBatch, gradRms: this.gradRms,
      // Copied before the all-reduce touches a bucket: a re-run without a lost member starts from it.
      keep: (sum) => { this.kept = { step: a.step, generation: a.generation, ids: [...a.sampleIds], ...sum }; },
      onStart: (ring) => this.c.log(`volunteer: step ${a.step + 1} all-reduce of ${model.layout.paramFloats} floats over ${ring.shape} in ${buckets.length} bucket${buckets.length === 1 ? '' : 's'} as backward runs`),
      throttle: (computeMs) => (x ? this.throttle(uploadMs + computeMs) : Promise.resolve()),
    });
    if (out.kind === 'no-ring') return;
    if (out.kind === 'failed') return this.ringFailed(out.error, a);
    state.applyUpdate(out.grads, a.step, a.globalBatch);
    const checksum = weightChecksum(state.w);
    this.committed = a.step + 1;
    // Left (paused, evicted, coordinator gone) while this step ran: nothing more to say.
    if (this.ended) return;
    const loss = images > 0 && Number.isFinite(out.lossSum / images) ? out.lossSum / images : null;
    // wait: idle between steps (the barrier), plus the time inside the all-reduce before the
    // first frame came (prev was still computing); comm: the rest of the all-reduce, exposedComm
    // the part of it after this peer's backward ended. compute excludes the wait for data.
    const idle = this.lastReportAt > 0 ? Math.max(0, arrived - this.lastReportAt) : 0;
    const t = out.timings;
    const timings = { computeMs: clampMs(uploadMs + t.computeMs), commMs: clampMs(t.commMs), waitMs: clampMs(idle + t.waitMs), dataMs: clampMs(this.dataMs), exposedCommMs: clampMs(t.exposedCommMs), overheadMs: clampMs(t.overheadMs) };
    this.report(a, out.ring, { loss, checksum, timings, images, sentBytes: out.sentBytes, ...(reused > 0 ? { reused } : {}) }, 1);
  }

  private report(a: StepAssignment, ring: StepRings, r: { loss: number | null; checksum: string; timings: StepTimings & { dataMs: number }; images: number; sentBytes: number; reused?: number }, steps: number): void {
    const fetchedBytes = this.c.fetched.bytes;
    this.send({ type: 'step-result', peerId: this.peerId, generation: a.generation, step: a.step, ...r, fetchedBytes, ...(ring.size > 1 && this.links.next ? { link: this.links.next } : {}), ...(ring.size > 1 && this.links.prev ? { linkPrev: this.links.prev } : {}) });
    this.lastReportAt = performance.now();
    this.c.o.onEvent?.({ type: 'step', step: a.step + steps, generation: a.generation, ringSize: ring.size, images: r.images, loss: r.loss, computeMs: r.timings.computeMs, commMs: r.timings.commMs, innerSteps: steps, sentBytes: r.sentBytes, dataMs: r.timings.dataMs, fetchedBytes });
  }

  /**
   * A round (rounds.ts): H' inner steps on this peer's slices (or the contribution it already
   * computed, when the coordinator re-runs the round without a lost member), the ring's sum of
   * the contributions, the outer step.
   */
  private async round(a: StepAssignment, plan: RoundAssignment, rounds: RoundState): Promise<void> {
    const arrived = performance.now();
    this.dataMs = 0;
    // The round's first inner slices start loading while the ring forms.
    if (this.c.prefetch) for (const s of innerAhead(a, plan, -1)) this.c.batches.hint(s.sampleIds, s.epoch);
    if (rounds.undo(a.step)) this.committed = a.step;
    this.requireStep(a.step, 'train');
    checkRingStep(a);
    const ring = await this.joinRing(a);
    if (!ring) return;
    if (a.uploadCheckpoint) await this.upload(a.step);
    const tc = performance.now();
    const { work, reused } = await rounds.contribution(a.step, plan, (ids, epoch, step) => this.gradient(ids, epoch, a.seed, step, innerAhead(a, plan, step - a.step)));
    if (reused) this.c.log(`volunteer: round at step ${a.step + 1}: reusing the ${work.images} images computed before (a member was lost)`);
    else await this.throttle(work.computeMs - this.dataMs);
    const t1 = performance.now();
    let firstFrame = t1;
    const sum = work.change.slice();
    if (ring.size > 1) {
      this.c.log(`volunteer: round at step ${a.step + 1} (${plan.ids.length} inner steps, ${work.images} images here): all-reduce of ${sum.length} floats over ${ring.shape}`);
      try {
        await ring.allReduce(sum, { step: roundRingStep(a.step), maxRms: changeBound(work.change, work.images, plan.images), onFirstFrame: () => { firstFrame = performance.now(); } });
      } catch (e) {
        return this.ringFailed(e, a);
      }
    }
    const t2 = performance.now();
    rounds.apply(a.step, sum, plan.images);
    this.committed = a.step + plan.ids.length;
    if (this.ended) return;
    const idle = this.lastReportAt > 0 ? Math.max(0, arrived - this.lastReportAt) : 0;
    const timings = { computeMs: Math.min(MAX_MS, reused ? 0 : Math.max(0, t1 - tc - this.dataMs)), commMs: Math.min(MAX_MS, t2 - firstFrame), waitMs: Math.min(MAX_MS, idle + (firstFrame - t1)), dataMs: Math.min(MAX_MS, this.dataMs) };
    const loss = work.images > 0 && Number.isFinite(work.lossSum / work.images) ? work.lossSum / work.images : null;
    this.report(a, ring, { loss, checksum: weightChecksum(this.c.state.w), timings, images: work.images, sentBytes: ring.sentBytes(sum.length) }, plan.ids.length);
  }

  /** A ring that failed: tell the coordinator whom it blames, unless we closed it ourselves. */
  private ringFailed(e: unknown, a: StepAssignment): void {
    if (!isRingError(e)) throw e;
    // Released: the link to the peer it blames is closed, the others may serve the next generation.
    this.ring?.release();
    this.ring = null;
    if (e.kind === 'closed') {
      // Preempted by a newer assignment: nothing to report.
      this.c.log(`volunteer: step ${a.step + 1} generation ${a.generation}: collective ended, the coordinator moved on`);
      return;
    }
    this.c.log(`volunteer: step ${a.step + 1} generation ${a.generation}: ${e.message}`);
    // An ABORT passed on by a neighbour names the peer to blame and the original failure: report that.
    this.send({ type: 'collective-failure', peerId: this.peerId, generation: a.generation, step: a.step, failedPeerId: e.peerId, kind: e.origin });
  }
}
