// One membership of the job: the join, the session socket to the coordinator, the signaling
// endpoint and its rings (volunteer-ring.ts). Messages are handled one at a time in arrival
// order; a step assignment of an older generation with a newer one (or a reload, the end, an
// eviction) behind it is skipped. The training work itself is the trainer's (volunteer-train.ts).
//
// Leaving: stopped by its owner, a member in the middle of a step finishes it first (the
// coordinator lets it go once the step commits); a failed message leaves with its reason; the
// coordinator ends it with 'done' or 'evicted', or by closing the socket (lost).
import { openEndpoint, type PeerEndpoint } from '../comm/index.ts';
import type { AnyEngine } from '../backend/engine.ts';
import { weightChecksum } from './checksum.ts';
import { join } from './http.ts';
import {
  MAX_PROBE_MS_PER_IMAGE, PROTOCOL_VERSION, SESSION_PATH, type CoordinatorMessage, type IceServer, type JoinAccept, type LoadState, type PeerMessage,
} from '../protocol/messages.ts';
import { describe, parseJsonText } from '../protocol/fields.ts';
import { loadCheckpoint, uploadState } from './volunteer-checkpoint.ts';
import { declaredMicroBatch, type Ctx, type SessionEnd, type SocketLike } from './volunteer-context.ts';
import { evalCounts } from './volunteer-eval.ts';
import { ShapeReceiver } from './ring-shape.ts';
import { SessionRing } from './volunteer-ring.ts';
import { Trainer } from './volunteer-train.ts';
import { TailClaims } from './tail-claims.ts';
import { StepMachine, type PhaseChange } from './step-machine.ts';

/** A volunteer stopped mid-step waits at most this long for its step to commit (stop()). */
export const LEAVE_AFTER_STEP_MS = 15_000;

/** The device a peer reports (shown on the dashboard's ring): backend and device. */
export function deviceLabel(e: AnyEngine): string {
  return `${e.info.backend}: ${e.info.description}`.slice(0, 200);
}

/** One membership of the job: a join, its session socket, its signaling endpoint and rings. */
export class Session {
  private readonly ring: SessionRing;
  private readonly trainer: Trainer;
  /** Claims on the running step's tail (answered by grants beside the queue). */
  readonly claims: TailClaims;
  /** Where this session's step is (step-machine.ts): messages and the trainer move it. */
  readonly machine = new StepMachine((c) => this.changed(c));
  /** The pump's current run over the queue. */
  private pumping: Promise<void> = Promise.resolve();
  private readonly queue: CoordinatorMessage[] = [];
  /** The ring and plan of this session's generation (assignments after its first leave them out). */
  private readonly shapes = new ShapeReceiver();
  private busy = false;
  private endWith: ((e: SessionEnd) => void) | null = null;
  private endReason: SessionEnd | null = null;
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  /** Stopped mid-step: the bound on waiting for the coordinator to let it go (stop()). */
  private leaving: ReturnType<typeof setTimeout> | null = null;

  private constructor(
    private readonly c: Ctx, private readonly accept: JoinAccept, private readonly endpoint: PeerEndpoint, private readonly ws: SocketLike,
    readonly rtcConfig: RTCConfiguration,
  ) {
    this.ring = new SessionRing(endpoint, {
      peerId: accept.peerId, job: accept.job, iceServers: accept.iceServers, deadAfterMs: c.o.deadAfterMs ?? 120_000, wire: c.wire, log: c.log,
      ...(c.job.job.ringFormMs === undefined ? {} : { ringFormMs: c.job.job.ringFormMs }),
      send: (m) => this.send(m),
    });
    this.claims = new TailClaims(accept.peerId, (m) => this.send(m));
    this.trainer = new Trainer(c, this.ring, this);
    // The coordinator may speak first (load-state at once): listen from the moment the
    // socket is open; messages wait in the queue until run() starts the pump.
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = (ev) => {
      const why = `the coordinator closed the session (${ev.code ?? ''} ${ev.reason ?? ''})`.trim();
      if (this.onEarlyClose) this.onEarlyClose(why);
      // Stopping: the coordinator let it go (at once, when it was in no step) by closing the session.
      else if (this.leaving) this.end({ reason: 'stopped', detail: 'stopped' });
      else this.end({ reason: 'lost', detail: why });
    };
    ws.onerror = () => undefined; // a close follows
  }

  /** Set while the socket is opening: a close then fails the open. */
  onEarlyClose: ((why: string) => void) | null = null;

  static async open(c: Ctx): Promise<Session> {
    const body = {
      type: 'join' as const, protocol: PROTOCOL_VERSION,
      ...(c.o.token ? { token: c.o.token } : {}), ...(c.o.name ? { name: c.o.name } : {}), ...(c.o.donor ? { donor: c.o.donor } : {}),
      ...(c.p.direct ? { direct: { port: c.p.direct.port, addresses: [...c.p.direct.addresses] } } : {}),
      // Its first step's silence allowance (coordinator/silence.ts): what its engine took per image before it joined.
      probeMsPerImage: Math.min(MAX_PROBE_MS_PER_IMAGE, Math.ceil(c.fit.footprint.msPerImage)),
      // What it computes at once, for its session: an audit of its slice recomputes it in the same micro-batches.
      microBatch: declaredMicroBatch(c.fit),
    };
    const accept = await join(c.fetchFn, c.base, body);
    const url = new URL(c.base);
    const rtcConfig = c.p.rtcConfigFor
      ? c.p.rtcConfigFor(accept.iceServers)
      : { ...c.p.rtcConfig, iceServers: [...(c.p.rtcConfig.iceServers ?? []), ...accept.iceServers] };
    const { direct } = c.p;
    const secret = accept.directSecret;
    const endpoint = await openEndpoint({
      Peer: c.p.Peer, id: accept.peerId, token: accept.signalingToken, rtcConfig,
      ...(direct && secret ? { wrap: (peer) => direct.wrap(peer, secret, c.log) } : {}),
      server: {
        host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), path: accept.signalingPath, secure: url.protocol === 'https:',
      },
    });
    const wsUrl = `${url.protocol === 'https:' ? 'wss' : 'ws'}://${url.host}${SESSION_PATH}`
      + `?peer=${encodeURIComponent(accept.peerId)}&token=${encodeURIComponent(accept.signalingToken)}`;
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

  /** The step whose weights this peer holds (committed or tentatively applied), null until loaded. */
  get committed(): number | null {
    return this.trainer.committed;
  }

  /** True once a ring with neighbours formed in this session. */
  get linked(): boolean {
    return this.ring.linked;
  }

  /** The session has ended (run() resolved, or will with the reason it ended with). */
  get ended(): boolean {
    return this.endReason !== null;
  }

  run(): Promise<SessionEnd> {
    const done = new Promise<SessionEnd>((resolve) => { this.endWith = resolve; });
    if (this.endReason) return Promise.resolve(this.endReason);
    this.pump();
    this.heartbeat = setInterval(() => this.send({
      type: 'heartbeat', peerId: this.peerId, generation: this.ring.current?.generation ?? 0, step: this.committed ?? 0,
    }), this.accept.heartbeatMs);
    const onAbort = () => this.stop();
    this.c.o.signal?.addEventListener('abort', onAbort, { once: true });
    // Stopped while joining: the listener above came too late to hear it.
    if (this.c.o.signal?.aborted) onAbort();
    return done.finally(() => this.c.o.signal?.removeEventListener('abort', onAbort));
  }

  /**
   * Stopped by its owner. A member of a ring (in a step or between two) finishes its step first:
   * it tells the coordinator, which lets it go with 'done' once the step commits (or at once,
   * closing the session, when it is in no step), so the ring neither aborts nor re-runs its
   * slice; it leaves anyway after LEAVE_AFTER_STEP_MS. Anyone else leaves now.
   */
  private stop(): void {
    if (this.ended || this.leaving) return;
    // A member between two steps leaves after its step too: the coordinator may have sent it
    // the next one already, and leaving now would abort that step for the whole ring.
    if (!this.ring.current && !this.busy) return this.end({ reason: 'stopped', detail: 'stopped' });
    this.c.log('volunteer: stopping after this step');
    this.send({ type: 'leave', peerId: this.peerId, reason: 'stopped by its owner', afterStep: true });
    this.leaving = setTimeout(() => this.end({ reason: 'stopped', detail: 'stopped' }), LEAVE_AFTER_STEP_MS);
  }

  private end(e: SessionEnd): void {
    if (this.ended) return;
    if (this.leaving) clearTimeout(this.leaving);
    // Say goodbye while send() still speaks: a normal leave, not a lost peer to blame.
    if (e.reason === 'stopped') this.send({ type: 'leave', peerId: this.peerId, reason: 'stopped by its owner' });
    this.endReason = e;
    if (this.heartbeat) clearInterval(this.heartbeat);
    // Whatever fails to close, the session ends (run() resolves): the volunteer must be able to rejoin.
    const teardown: [string, () => void][] = [
      ['claims', () => this.claims.close()],
      ['ring', () => this.ring.close()],
      ['WebRTC endpoint', () => this.endpoint.destroy()],
      ['session socket', () => { this.ws.onclose = null; this.ws.close(); }],
      // A step still running uses the batch: the pump releases it when that step is done.
      ['batch', () => { if (!this.busy) this.trainer.releaseBatch(); }],
    ];
    for (const [what, close] of teardown) {
      try {
        close();
      } catch (err) {
        this.c.log(`volunteer: closing the ${what} failed (${err instanceof Error ? err.message : String(err)}); the session ends anyway`);
      }
    }
    this.endWith?.(e);
  }

  send(m: PeerMessage): void {
    if (!this.ended && this.ws.readyState === 1) this.ws.send(JSON.stringify(m));
  }

  private receive(data: unknown): void {
    const parsed = typeof data === 'string'
      ? parseJsonText(data)
      : typeof data === 'object' && data !== null && 'toString' in data ? parseJsonText(String(data)) : null;
    const d = parsed?.ok ? this.shapes.decode(parsed.value) : parsed;
    if (!d || !d.ok) {
      this.c.log(`volunteer: ignored a message from the coordinator: ${d ? describe(d.error) : 'not text'}`);
      return;
    }
    const m = d.value;
    // Dialing ahead runs beside the step in progress (the queue waits for it); a joiner's first slice is loaded meanwhile.
    if (m.type === 'prepare') {
      if (m.next && this.c.prefetch) this.c.batches.hint(m.next.sampleIds, m.next.epoch);
      return void this.ring.prepare(m);
    }
    // A grant answers the claim of the step being handled: it cannot wait in the queue behind it.
    if (m.type === 'grant') return this.claims.answer(m);
    this.claims.preempt(m);
    this.ring.preempt(m);
    this.queue.push(m);
    this.pump();
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
          this.c.log(`volunteer: its step was in ${this.machine.phase}, after ${this.machine.trail() || 'no transition'}`);
          this.send({ type: 'leave', peerId: this.peerId, reason: why.slice(0, 900), failed: true });
          this.end({ reason: 'lost', detail: why, failed: true });
        }
      }
    } finally {
      this.busy = false;
      if (this.ended) this.trainer.releaseBatch();
    }
  }

  /**
   * A step assignment with a newer one (or a reload, the end, an eviction) behind it in the
   * queue: the coordinator has abandoned that generation, so its ring would never form.
   */
  private superseded(m: CoordinatorMessage): boolean {
    if (m.type !== 'step-assignment') return false;
    return this.queue.some((n) => n.type === 'load-state' || n.type === 'done' || n.type === 'evicted'
      || (n.type === 'step-assignment' && n.generation > m.generation));
  }

  private async handle(m: CoordinatorMessage): Promise<void> {
    switch (m.type) {
      case 'load-state': return this.loadState(m);
      case 'step-assignment': return this.trainer.step(m);
      case 'evaluate': {
        this.trainer.requireStep(m.step, 'evaluate');
        this.machine.go('Evaluating', m.step);
        const counts = await evalCounts(this.c.model, this.c.val, m, this.c.fit.images);
        this.send({ type: 'eval-result', peerId: this.peerId, step: m.step, counts });
        return this.machine.go('Ready', m.step);
      }
      case 'upload-checkpoint':
        this.trainer.undoApplied(m.step);
        this.trainer.requireStep(m.step, 'upload');
        this.machine.go('Uploading', m.step);
        await this.upload(m.step);
        return this.machine.go('Ready', m.step);
      case 'done':
        if (this.leaving) return this.end({ reason: 'stopped', detail: `stopped after step ${m.step}` });
        this.c.log(`volunteer: job done at step ${m.step} (${m.reason})`);
        return this.end({ reason: 'done', detail: m.reason });
      case 'evicted':
        return this.end({ reason: 'evicted', detail: `evicted: ${m.reason}`, unreachable: m.cause === 'unreachable' });
      case 'error':
        this.c.log(`volunteer: the coordinator refused a message: ${m.message}`);
        return;
      case 'hop-seed': {
        // A hearing (protocol 15): the ring's weights differ after that step; its records answer under the fresh seed.
        const answer = this.trainer.hopSketches(m);
        if (answer) return this.send(answer);
        this.c.log(`volunteer: asked for the hop records of step ${m.step + 1} (generation ${m.generation}), which this peer no longer keeps`);
        return;
      }
      case 'join-accept':
      case 'prepare':
      case 'grant':
        return;
    }
  }

  private async loadState(m: LoadState): Promise<void> {
    const { state } = this.c;
    this.machine.go('Loading', m.step);
    // Its first slice, when the coordinator planned it: loaded while the weights are.
    if (m.next && this.c.prefetch) this.c.batches.hint(m.next.sampleIds, m.next.epoch);
    if (m.source === 'seed') state.reset(this.c.job.job.seed);
    else await loadCheckpoint(this.c, m.step);
    this.trainer.loaded(m.step);
    const checksum = weightChecksum(state.w);
    this.c.o.onEvent?.({ type: 'state', step: m.step, source: m.source });
    this.send({ type: 'ready', peerId: this.peerId, step: m.step, checksum, device: deviceLabel(this.c.p.engine) });
    this.machine.go('Ready', m.step);
  }

  /** A transition of the step (step-machine.ts): told to the owner; a failure path is logged with its reason. */
  private changed(c: PhaseChange): void {
    if (c.to === 'Aborted') this.c.log(`volunteer: step ${c.step + 1}: ${c.from} -> Aborted (${c.why ?? 'aborted'})`);
    this.c.o.onEvent?.({ type: 'phase', from: c.from, to: c.to, step: c.step });
  }

  /** Uploads the weights of `step`. A refusal is logged, not fatal: the coordinator decides what follows. */
  upload(step: number, generation = this.ring.current?.generation ?? 0): Promise<void> {
    return uploadState(this.c, this.accept, step, generation);
  }
}
