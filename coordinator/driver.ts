// The training driver: the coordinator's state machine for one job (driver-machine.ts) and its
// inputs. Peers talk to it through their session sockets (sessions.ts: peerConnected, peerGone,
// message) and checkpoint uploads (routes.ts: expectsUpload, checkpointStored); a timer checks
// the deadlines and silences (tick); the dashboard and the churn bench read status, phaseTimes
// and tableSizes.
import type { Joiner } from './bans.ts';
import type { PeerMessage } from '../src/protocol/messages.ts';
import type { Topology } from '../src/comm/topology.ts';
import { measureStep, newPeer, requeue, silentPeers } from './driver-peers.ts';
import { ringFailure } from './driver-steps.ts';
import { type PhaseTimes, type DriverDeps, type DriverStatus } from './driver-types.ts';
import { grantNext, tailResultProblem } from './tail-pool.ts';
import { DriverMachine } from './driver-machine.ts';
import { inRing, rankOf } from './ring-index.ts';

export { ADMIT_BATCH_FROM } from './driver-generations.ts';
export { DEFAULT_TIMEOUTS, type AuditHooks, type DriverDeps, type DriverStatus, type DriverTimeouts, type PhaseTimes } from './driver-types.ts';

/**
 * One turn between steps (ms): from a step's last result in to the next step's assignments all handed to the sockets
 * (`ms`), in parts: the commit and the boundary's decisions (`commitMs`), planning the next step (`planMs`), and encoding and
 * writing its assignments (`sendMs`). The rest of `ms` is small bookkeeping between them.
 */
export interface Turn { ms: number; commitMs: number; planMs: number; sendMs: number }

/** The coordinator's own turns between steps. Bounded. */
export class TurnTimes {
  private times: Turn[] = [];
  note(t: Turn): void {
    this.times.push(t);
    if (this.times.length > 10_000) this.times.splice(0, this.times.length - 10_000);
  }
  /** The turns noted since the last call. */
  take(): Turn[] {
    const t = this.times;
    this.times = [];
    return t;
  }
}

export class Driver extends DriverMachine {
  /** Its turns between steps (the coordinator bench reads them). */
  readonly turns = new TurnTimes();

  constructor(d: DriverDeps) {
    super(d);
    this.timer = setInterval(() => this.tick(), 250);
    this.timer.unref?.();
  }

  /** Milliseconds spent in each kind of phase so far (PhaseClock). */
  phaseTimes(): PhaseTimes {
    return this.clock.times();
  }

  /** The sizes of the tables that grow with peers and steps: the churn bench checks they shrink back. */
  tableSizes(): { peers: number; uploads: number; evaluated: number } {
    return { peers: this.peers.size, uploads: this.ckpt.pending, evaluated: this.evals.count };
  }

  status(): DriverStatus {
    const paused = this.phase.kind === 'paused' || this.pauseAsked;
    const { step, peers, phase, ring } = this;
    return { step, generation: this.gen.generation, peers: peers.size, phase: phase.kind, ring: [...ring], topology: this.gen.topology, paused };
  }

  /** The ring planned ahead of a membership change (its neighbours may connect now), or null. */
  preparedRing(): { ring: readonly string[]; topology: Topology | null } | null {
    return this.gen.prepared;
  }

  /** Holds the job at the next step boundary (peers stay connected and idle). */
  pause(): void {
    this.pauseAsked = true;
    this.advance();
  }

  resume(): void {
    this.pauseAsked = false;
    if (this.phase.kind === 'paused') this.phase = { kind: 'between' };
    this.advance();
  }

  // ---- inputs ----------------------------------------------------------------------------

  /** `more`: what it said at its join (its donor's lasting id, its own timing of its engine per image, its micro-batch). */
  peerConnected(id: string, name: string | null, more: Pick<Joiner, 'donor' | 'probeMsPerImage' | 'microBatch'> = {}): void {
    if (this.phase.kind === 'done') {
      this.d.send(id, { type: 'done', step: this.step, reason: 'the job has finished' });
      return;
    }
    const { donor, probeMsPerImage, microBatch } = more;
    this.peers.set(id, {
      ...newPeer(id, name, Date.now()), ...(donor ? { donor } : {}), ...(probeMsPerImage ? { probeMsPerImage } : {}),
      ...(microBatch !== undefined ? { microBatch } : {}),
    });
    this.advance();
  }

  message(id: string, m: PeerMessage): void {
    const peer = this.peers.get(id);
    if (!peer) return;
    const now = Date.now();
    peer.maxGap = Math.max(peer.maxGap, now - peer.lastSeen);
    peer.lastSeen = now;
    const ph = this.phase;
    switch (m.type) {
      case 'heartbeat':
        return;
      case 'prepared':
        return this.ahead.prepared(id, m.id);
      case 'leave':
        // A member of the running step that asks to leave after it: let go at a boundary after
        // its commit (boundary()), so the ring keeps its slice; anyone else is gone now.
        if (m.afterStep && ph.kind === 'running' && inRing(ph.ring, id)) {
          peer.leavingSince ??= now;
          this.d.log(`peer ${id} leaves after step ${ph.step + 1} (${m.reason ?? 'asked'})`);
          return;
        }
        if (m.failed) this.workFailed(id, m.reason ?? 'its work failed');
        this.d.disconnect(id, m.reason ?? 'left');
        return this.peerGone(id, m.reason ?? 'left');
      case 'ready':
        if (ph.kind === 'admitting' && peer.state === 'loading' && m.step === ph.step) {
          peer.state = 'ready';
          peer.device = m.device;
          this.advance();
        }
        return;
      case 'step-result': {
        if (ph.kind !== 'running' || m.generation !== ph.generation || m.step !== ph.step || !inRing(ph.ring, id) || ph.results.has(id)) return;
        // With a tail, its sum must cover exactly its fixed part and its grants (tail-pool.ts); without one, its slice. The
        // image count weighs its result (the sum check, suspicion, credit): a member must not choose it.
        const fixed = ph.slices?.[rankOf(ph.ring, id)]?.length;
        const wrong = ph.tail ? tailResultProblem(ph.tail, id, fixed!, m.images, m.claimed)
          : fixed !== undefined && m.images !== fixed ? `it reported ${m.images} images where its slice holds ${fixed}`
          // Audits recompute a slice in the micro-batches its member said at its join: it may not compute in others.
          : peer.microBatch !== undefined && m.microBatch !== peer.microBatch
            ? `it computed in micro-batches of ${m.microBatch ?? 'any size'} where it said ${peer.microBatch} at its join`
          // An audit judges a re-run's sum as the pieces it was asked to reuse and compute: it may not say it reused more.
          : ph.verified && (m.reused ?? 0) > (ph.verified.reuse.get(id) ?? 0)
            ? `it reported ${m.reused} ids reused from a kept sum where it was asked to reuse ${ph.verified.reuse.get(id) ?? 0}`
          : null;
        if (wrong) return this.evict([id], `its result of step ${ph.step + 1} is not what it was asked for: ${wrong}`);
        ph.results.set(id, m);
        Object.assign(peer, measureStep(peer, m));
        const [before, t0] = [this.step, performance.now()];
        this.advance();
        // The last result of a step: its commit and the next step's assignments, all on this turn, which ends once they
        // are out (the commit's records and the next epoch's shuffle come after: startStep).
        if (this.step === before) return;
        const a = this.assigned;
        // A commit that led elsewhere than a step (an evaluation, the end): all of it was the commit's.
        const done = performance.now() - t0;
        if (a.startedAt < t0) this.turns.note({ ms: done, commitMs: done, planMs: 0, sendMs: 0 });
        else this.turns.note({ ms: a.at - t0, commitMs: a.startedAt - t0, planMs: a.plannedAt - a.startedAt, sendMs: a.at - a.sendFrom });
        return;
      }
      case 'claim': {
        // The next chunk of the running step's tail; empty for a step that has none or is over.
        const live = ph.kind === 'running' && ph.tail && m.generation === ph.generation && m.step === ph.step && ph.ring.includes(id) && !ph.results.has(id);
        const g = live ? grantNext(ph.tail!, id, Date.now()) : { ids: [], last: false };
        this.d.send(id, { type: 'grant', generation: m.generation, step: m.step, ids: g.ids, ...(g.last ? { last: true as const } : {}) });
        return;
      }
      case 'collective-failure': {
        if (ph.kind !== 'running' || m.generation !== ph.generation || m.step !== ph.step || !ph.ring.includes(id)) return;
        const f = ringFailure(ph, id, m, this.firstStepOfGeneration);
        if (f === 'decide') this.decideUnreachable(ph);
        else if (f !== 'wait') this.ringFailed(ph, m.kind, f);
        return;
      }
      case 'eval-result':
        if (ph.kind === 'evaluating' && this.evals.answer(ph, id, m)) this.advance();
        return;
      case 'hop-sketches': {
        // A hearing's answer (protocol 15): once each member of the step answered, its hop checks decide.
        const h = ph.kind === 'running' ? ph.hearing : undefined;
        if (ph.kind !== 'running' || !h || m.generation !== ph.generation || m.step !== ph.step || !ph.ring.includes(id) || h.replies.has(id)) return;
        h.replies.set(id, m);
        if (h.replies.size === ph.ring.length) this.heard(ph);
        return;
      }
      case 'join':
      case 'checkpoint-announce':
        return;
    }
  }

  /** Whether `peerId` may upload the checkpoint of `step` now (the upload route asks). */
  expectsUpload(peerId: string, step: number): boolean {
    return this.ckpt.expects(peerId, step);
  }

  checkpointStored(peerId: string, step: number): void {
    this.ckpt.stored(peerId, step);
    this.record({ type: 'checkpoint', time: Date.now(), step }, { type: 'checkpoint', step });
    this.advance();
  }

  private tick(): void {
    const now = Date.now();
    const silent = silentPeers(this.peers.values(), this.phase, (id) => this.ckpt.uploading(id), this.timeouts, now);
    if (silent.length) {
      for (const { id } of silent) this.d.disconnect(id, `silent for over ${Math.round((now - (this.peers.get(id)?.lastSeen ?? now)) / 1000)} s`);
      // Its limit now (silence.ts): more than silentMs while it computes or does work nothing has measured yet.
      const limits = [...new Set(silent.map((s) => (s.limitMs / 1000).toFixed(1)))].join(', ');
      this.gone(silent.map((s) => s.id), `no heartbeat for longer than its silence limit (${limits} s)`);
    }
    const ph = this.phase;
    if (ph.kind === 'running' && ph.hearing) {
      const h = ph.hearing;
      if (now > h.deadline) this.evict(ph.ring.filter((id) => !h.replies.has(id)), `no hop records for the hearing of step ${ph.step + 1} within `
        + `${this.timeouts.hearingMs} ms (a volunteer older than protocol 15, or one that keeps no records of its step)`);
    } else if (ph.kind === 'running' && ph.unreachable && now >= ph.unreachable.decideAt) {
      this.decideUnreachable(ph);
    } else if (ph.kind === 'running' && now > ph.deadline) {
      this.evict(ph.ring.filter((id) => !ph.results.has(id)), `no result for step ${ph.step} within ${ph.deadline - ph.started} ms`);
    } else if (ph.kind === 'evaluating' && now > ph.deadline) {
      this.evict([...ph.pending.keys()], `no evaluation result within ${this.timeouts.evalMs} ms`);
    } else if (ph.kind === 'admitting' && now > ph.deadline) {
      if (!this.ckpt.loadable(ph.step)) {
        this.d.log(`the checkpoint of step ${ph.step} was not uploaded in time; training on without the joiners for now`);
        if (ph.uploadFrom) this.ckpt.forget(ph.uploadFrom);
        requeue(ph.joiners, this.peers, { admitAfter: now + this.timeouts.admitMs });
        return this.boundary();
      }
      const slow = ph.joiners.filter((id) => this.peers.get(id)?.state === 'loading');
      if (slow.length) this.evict(slow, `did not load step ${ph.step} within ${this.timeouts.admitMs} ms`);
    } else if (ph.kind === 'finishing' && now > ph.deadline) {
      const what = ph.then === 'done' ? 'final checkpoint' : `checkpoint of step ${ph.step}`;
      this.evict([ph.uploadFrom], `did not upload the ${what} within ${this.timeouts.admitMs} ms`);
    }
  }
}
