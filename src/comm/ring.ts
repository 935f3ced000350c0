// A Ring is this peer's place in one generation's ring: its two links, their liveness, and
// the routing of incoming frames to the collective that is running. Frames of another
// generation (an abandoned attempt's) are dropped unread and blame nobody. It owns the failure
// policy: the first failure (a neighbour closed or went silent, a stale or malformed frame)
// fails the running collective, is told to both neighbours in an ABORT frame (which they
// pass on), and makes every later call fail at once. A failed ring is never reused: the
// caller forms the next generation's ring and redoes the step. Its links may be: release()
// ends the ring like close() but hands each link that is open, and whose remote is not the peer
// the failure is blamed on, back to its lender (PeerEndpoint's pool, link-pool.ts), so the next
// generation's ring can keep the connection instead of dialing a new one.

import { RingError, type RingErrorKind } from './errors.ts';
import type { Link } from './link.ts';
import { FrameKind, abortFrame, heartbeatFrame, isReuseKind, parseAbort, parseFrame, type FrameHeader } from '../protocol/frames.ts';

export interface RingSettings {
  /** A heartbeat goes on each link that sent nothing for this long. */
  heartbeatMs: number;
  /** A neighbour silent this long (no data, no heartbeat) is declared gone. */
  deadAfterMs: number;
  /** A collective that received nothing for this long fails even though neighbours answer. */
  stallTimeoutMs: number;
  /** Stop sending while more than this is buffered on the next link... */
  highWaterBytes: number;
  /** ...until `bufferedamountlow` says it fell to this. */
  lowWaterBytes: number;
  /** Frames of a later step that may arrive before our collective starts (bounded memory). */
  maxEarlyBytes: number;
}

export const DEFAULT_RING_SETTINGS: RingSettings = {
  heartbeatMs: 500,
  deadAfterMs: 4000,
  stallTimeoutMs: 30_000,
  highWaterBytes: 1 << 20,
  lowWaterBytes: 256 << 10,
  maxEarlyBytes: 256 << 20,
};

export interface RingInit {
  selfId: string;
  /** The generation's ring order; this peer sends to the id after it and receives from the one before. */
  ids: readonly string[];
  /** Numbers that every frame carries; frames with other values are refused. Each fits a u32. */
  job: number;
  generation: number;
  /** Links to ids[rank+1] and from ids[rank-1] (required when the ring has 2 or more peers). */
  next?: Link;
  prev?: Link;
  settings?: Partial<RingSettings>;
  /** How many of next and prev an earlier generation's ring used already (for logs). */
  reusedLinks?: number;
  /** Connection attempts made to next and offered by prev while forming (link-formation.ts). */
  attempts?: { dials: number; offers: number };
}

/** The running collective, as the ring sees it (implemented in allreduce.ts). */
export interface CollectiveSink {
  readonly step: number;
  /** A data frame of this step from prev; throws RingError to refuse it. */
  data(header: FrameHeader, frame: Uint8Array): void;
  /** Something the sender may be waiting for happened (drain, progress). */
  wake(): void;
  fail(err: RingError): void;
}

const U32_MAX = 0xffffffff;
const isU32 = (x: number): boolean => Number.isInteger(x) && x >= 0 && x <= U32_MAX;

export class Ring {
  readonly selfId: string;
  readonly ids: readonly string[];
  readonly rank: number;
  readonly size: number;
  readonly job: number;
  readonly generation: number;
  readonly settings: RingSettings;
  readonly next: Link | null;
  readonly prev: Link | null;
  /** Links taken over from an earlier generation's ring (RingInit.reusedLinks). */
  readonly reusedLinks: number;
  /** RingInit.attempts (zeros when not formed by a LinkFormation). */
  readonly attempts: { dials: number; offers: number };

  private err: RingError | null = null;
  private closedLocally = false;
  /** Set by releaseOnClose(): close() hands the links back instead of closing them. */
  private keepLinks = false;
  private active: CollectiveSink | null = null;
  /** When the running collective began: a neighbour's silence before it is judged by deadAfterMs alone. */
  private activeSince = 0;
  /** The dead time while a collective runs (setActiveDeadMs), when shorter than deadAfterMs. */
  private activeDeadMs: number | null = null;
  private lastStep = -1;
  private early: { header: FrameHeader; frame: Uint8Array }[] = [];
  private dropped = 0;
  private earlyBytes = 0;
  private readonly lastHeard = new Map<Link, number>();
  private readonly lastSent = new Map<Link, number>();
  private lastTick = Date.now();
  private lastProgress = Date.now();
  private timer: ReturnType<typeof setInterval> | null = null;
  private readonly listeners = new Set<(e: RingError) => void>();

  constructor(init: RingInit) {
    const { selfId, ids, job, generation } = init;
    this.selfId = selfId;
    this.ids = [...ids];
    this.job = job;
    this.generation = generation;
    this.settings = { ...DEFAULT_RING_SETTINGS, ...init.settings };
    this.rank = ids.indexOf(selfId);
    this.size = ids.length;
    this.reusedLinks = init.reusedLinks ?? 0;
    this.attempts = init.attempts ?? { dials: 0, offers: 0 };
    const bad = (why: string) => new RingError('bad-input', selfId, why);
    if (this.rank < 0) throw bad(`self id ${selfId} is not in the ring [${ids.join(', ')}]`);
    if (new Set(ids).size !== ids.length) throw bad(`ring ids are not distinct: [${ids.join(', ')}]`);
    if (!isU32(job) || !isU32(generation)) throw bad(`job ${job} and generation ${generation} must be integers in [0, 2^32)`);
    if (this.size === 1) {
      this.next = this.prev = null;
      return;
    }
    const nextId = ids[(this.rank + 1) % this.size];
    const prevId = ids[(this.rank - 1 + this.size) % this.size];
    if (!init.next || !init.prev) throw bad('a ring of 2 or more peers needs a next and a prev link');
    if (init.next.remoteId !== nextId || init.prev.remoteId !== prevId) {
      throw bad(`links go to ${init.next.remoteId}/${init.prev.remoteId}, the ring says next ${nextId}, prev ${prevId}`);
    }
    if (init.next === init.prev) throw bad('next and prev must be separate links (one per direction of data)');
    this.next = init.next;
    this.prev = init.prev;
    const now = Date.now();
    for (const link of [this.next, this.prev]) {
      this.lastHeard.set(link, now);
      this.lastSent.set(link, 0);
      link.setLowWater(this.settings.lowWaterBytes);
      link.listen({
        frame: (f) => this.onFrame(link, f),
        drain: () => this.active?.wake(),
        close: (reason) => {
          if (!this.closedLocally) this.fail(new RingError('peer-closed', link.remoteId, reason, selfId));
        },
      });
    }
    this.timer = setInterval(() => this.tick(), this.settings.heartbeatMs);
  }

  /** The failure that ended this ring, or null while it is usable. */
  get error(): RingError | null {
    return this.err;
  }

  /** Frames of another generation of this job that were dropped unread (another attempt's). */
  get droppedFrames(): number {
    return this.dropped;
  }

  /** Called once with the failure that ends this ring (also between collectives). */
  onError(cb: (e: RingError) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /**
   * Stops heartbeats and ends both links; a running collective fails with 'closed'. The links are
   * closed, unless releaseOnClose() was called: then a link that is open, can be handed back
   * (Link.release) and does not lead to the peer this ring's failure is blamed on goes back to
   * its lender; the others are closed (a blamed neighbour must not be kept).
   */
  close(): void {
    if (this.closedLocally) return;
    this.fail(new RingError('closed', this.selfId, this.keepLinks ? 'the ring was released locally' : 'the ring was closed locally', this.selfId));
    this.closedLocally = true;
    const e = this.err;
    const blamed = e && e.kind !== 'closed' && e.kind !== 'bad-input' ? e.peerId : null;
    for (const link of [this.next, this.prev]) {
      if (!link) continue;
      if (this.keepLinks && link.release && !link.closed && link.remoteId !== blamed) link.release();
      else link.close();
    }
  }

  /**
   * Makes close() hand the links back instead of closing them. Separate from release() because a
   * two-level generation's rings close each other (hierarchical.ts): both are marked first.
   */
  releaseOnClose(): void {
    this.keepLinks = true;
  }

  /** close(), handing the links that may be kept back to their lender (see close()). */
  release(): void {
    this.releaseOnClose();
    this.close();
  }

  // ---- used by allreduce.ts ------------------------------------------------------------

  /** Starts the collective of `sink.step`; feeds it frames that arrived early. Throws RingError. */
  begin(sink: CollectiveSink): void {
    if (this.err) throw this.err;
    if (this.active) throw new RingError('bad-input', this.selfId, `step ${sink.step} started while step ${this.active.step} is running`);
    if (!isU32(sink.step) || sink.step <= this.lastStep) {
      throw new RingError('bad-input', this.selfId, `step ${sink.step} must be an integer above the last step ${this.lastStep}`);
    }
    this.active = sink;
    this.lastStep = sink.step;
    this.lastProgress = Date.now();
    this.activeSince = this.lastProgress;
    const early = this.early;
    this.early = [];
    this.earlyBytes = 0;
    for (const { header, frame } of early) this.onData(header, frame);
  }

  end(sink: CollectiveSink): void {
    if (this.active === sink) this.active = null;
  }

  /**
   * While a collective runs, a neighbour silent for `ms` since it began (or since it was last
   * heard, whichever is later) is gone: the coordinator's bound on how long a member's own work
   * may block it (StepAssignment.deadMs), so a cut link is noticed in seconds. Outside a
   * collective (and with null) deadAfterMs alone applies: between steps a neighbour may evaluate
   * or load for longer.
   */
  setActiveDeadMs(ms: number | null): void {
    this.activeDeadMs = ms;
  }

  /** Sends a data frame to next (the caller handles back-pressure). */
  sendNext(frame: Uint8Array): void {
    const next = this.next;
    // A failed ring sends nothing more: its link may be released to the next generation's ring.
    if (!next || this.err) return;
    next.send(frame);
    this.lastSent.set(next, Date.now());
  }

  progress(): void {
    this.lastProgress = Date.now();
  }

  fail(e: RingError): void {
    if (this.err) return;
    this.err = e;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (e.kind !== 'closed') {
      // Tell both neighbours; each passes it on once, so it goes round the ring both ways.
      const notice = abortFrame(this, { peerId: e.peerId, kind: e.kind === 'aborted' ? e.origin : e.kind, detail: e.message });
      for (const link of new Set([this.next, this.prev])) link?.send(notice);
    }
    this.active?.fail(e);
    for (const cb of this.listeners) cb(e);
  }

  // ---- incoming ------------------------------------------------------------------------

  private onFrame(link: Link, frame: Uint8Array): void {
    if (this.err) return; // a failed ring reads nothing more
    const parsed = parseFrame(frame);
    const from = link.remoteId;
    if (!parsed.ok) return this.fail(new RingError('bad-frame', from, parsed.reason, this.selfId));
    const h = parsed.header;
    // The reuse handshake is the endpoint's business (link-pool.ts intercepts it on kept links),
    // READY the link's (peerjs-link.ts takes it); on another link they mean nothing to this ring.
    if (isReuseKind(h.kind) || h.kind === FrameKind.ready) return;
    if (h.job !== this.job) {
      return this.fail(new RingError('stale', from, `frame of job ${h.job}, this ring is job ${this.job}`, this.selfId));
    }
    if (h.generation !== this.generation) {
      // Another attempt's frame (an abandoned generation's, still in flight or delivered late):
      // its sender did nothing wrong, and it must never count for this attempt. Dropped unread;
      // it does not count as a sign of life for this ring either.
      this.dropped++;
      return;
    }
    this.lastHeard.set(link, Date.now());
    if (h.kind === FrameKind.heartbeat) return;
    if (h.kind === FrameKind.abort) {
      const notice = parseAbort(frame);
      if (!notice) return this.fail(new RingError('bad-frame', from, 'unreadable abort frame', this.selfId));
      const origin = (notice.kind in KINDS ? notice.kind : 'aborted') as RingErrorKind;
      return this.fail(new RingError('aborted', notice.peerId, `${from} aborted the ring: ${notice.detail}`, from, origin));
    }
    if (link !== this.prev) return this.fail(new RingError('bad-frame', from, 'data frame on the link to next (data only flows from prev)', this.selfId));
    this.onData(h, frame);
  }

  private onData(h: FrameHeader, frame: Uint8Array): void {
    const from = this.prev?.remoteId ?? this.selfId;
    const current = this.active?.step ?? this.lastStep;
    if (this.active && h.step === this.active.step) {
      try {
        this.active.data(h, frame);
      } catch (e) {
        if (!(e instanceof RingError)) throw e;
        this.fail(e);
      }
    } else if (h.step > current) {
      // prev may finish a step and start the next before we start it: keep its frames.
      this.earlyBytes += frame.byteLength;
      if (this.earlyBytes > this.settings.maxEarlyBytes) {
        return this.fail(new RingError('bad-frame', from, `more than ${this.settings.maxEarlyBytes} bytes arrived ahead of step ${h.step}`, this.selfId));
      }
      this.early.push({ header: h, frame });
    } else {
      this.fail(new RingError('stale', from, `frame of step ${h.step} while at step ${current}`, this.selfId));
    }
  }

  private tick(): void {
    const now = Date.now();
    const late = now - this.lastTick > 2 * this.settings.heartbeatMs;
    this.lastTick = now;
    for (const link of [this.next, this.prev]) {
      if (!link || now - (this.lastSent.get(link) ?? 0) < this.settings.heartbeatMs) continue;
      link.send(heartbeatFrame(this));
      this.lastSent.set(link, now);
    }
    // If our own event loop was blocked, frames may be waiting unread: judge on the next tick.
    if (late) return;
    const active = this.active !== null && this.activeDeadMs !== null && this.activeDeadMs < this.settings.deadAfterMs;
    const dead = active ? this.activeDeadMs! : this.settings.deadAfterMs;
    for (const link of [this.next, this.prev]) {
      if (!link) continue;
      const silent = now - Math.max(this.lastHeard.get(link) ?? now, active ? this.activeSince : 0);
      if (silent > dead) {
        return this.fail(new RingError('peer-timeout', link.remoteId, `no frame or heartbeat for ${silent} ms`, this.selfId));
      }
    }
    if (this.active && now - this.lastProgress > this.settings.stallTimeoutMs) {
      this.fail(new RingError(
        'stalled', this.prev?.remoteId ?? this.selfId, `no data for ${now - this.lastProgress} ms in step ${this.active.step}`, this.selfId,
      ));
    }
  }
}

const KINDS: Record<RingErrorKind, true> = {
  'peer-closed': true, 'peer-timeout': true, stalled: true, stale: true, 'bad-frame': true,
  aborted: true, 'connect-failed': true, closed: true, 'bad-input': true,
};
