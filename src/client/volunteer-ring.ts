// A session's ring: the rings of the generation it is in (step-rings.ts), formed when an
// assignment needs them and given up when a newer one comes first; closed or released when the
// coordinator moves on (a newer generation keeps the links it shares with this one); and a
// failed collective reported to the coordinator with the peer it blames.
import { formStepRings, type StepRings } from './step-rings.ts';
import { relayHostsOf } from '../comm/route.ts';
import { isRingError, type PeerEndpoint } from '../comm/index.ts';
import { neighboursOf, type PreDial } from '../comm/peer-endpoint.ts';
import { roleOf } from '../comm/topology.ts';
import type { WireFormat } from '../protocol/frames.ts';
import {
  failureDetail, type CoordinatorMessage, type IceServer, type LinkKind, type PeerMessage, type PrepareRing, type StepAssignment,
} from '../protocol/messages.ts';

export interface SessionRingOptions {
  peerId: string;
  /** The job's number (the join answer's): the rings' links are keyed by it. */
  job: number;
  /** The job's ICE servers: the relays a link may run through. */
  iceServers: IceServer[];
  /** A ring neighbour silent this long is gone (VolunteerOptions.deadAfterMs). */
  deadAfterMs: number;
  /** The job's wire format: every collective of these rings sends it (sync-step.ts jobWire). */
  wire: WireFormat;
  /** The job's ringFormMs: how long its rings may take to form (absent: RING_FORM_TIMEOUT_MS). */
  ringFormMs?: number;
  log: (line: string) => void;
  send: (m: PeerMessage) => void;
}

/** The ring of the session's current generation (null: none formed, or given up). */
export class SessionRing {
  private ring: StepRings | null = null;
  /** Set while a ring is being formed: gives up on it (a newer assignment came, or the session ended). */
  private supersede: (() => void) | null = null;
  /** How the links to the ring successor and from the predecessor run (null: unknown). */
  links: { next: LinkKind | null; prev: LinkKind | null } = { next: null, prev: null };
  /** True once a ring with neighbours formed in this session. */
  linked = false;

  constructor(private readonly endpoint: PeerEndpoint, private readonly o: SessionRingOptions) {}

  /** The ring formed for the current generation, if any. */
  get current(): StepRings | null {
    return this.ring;
  }

  /**
   * Preempt: a collective of an older generation cannot finish any more once the coordinator
   * moved on (`m`); closing the ring ends it now instead of at its timeout.
   */
  preempt(m: CoordinatorMessage): void {
    const moves = m.type === 'load-state' || m.type === 'done' || m.type === 'evicted'
      || (m.type === 'step-assignment' && m.generation !== this.ring?.generation);
    if (moves && this.ring) {
      // A new generation keeps the links it shares with this one (released, not closed); a
      // reload, the end or an eviction ends them (the session's end closes whatever is left).
      if (m.type === 'step-assignment') this.ring.release();
      else this.ring.close();
      this.ring = null;
    }
    if (moves) this.supersede?.();
  }

  /**
   * Make before break: dials this peer's successors in the ring the coordinator is about to
   * switch to (links already kept are not dialed again), while the current ring trains on; says
   * `prepared` once they opened or failed. Runs beside the step, not in the message queue.
   */
  async prepare(m: PrepareRing): Promise<void> {
    if (m.direct) this.endpoint.learnRoutes(m.direct);
    const links = aheadLinks(m, this.o.peerId);
    if (links === null) return; // not in it: nothing to dial
    const t0 = performance.now();
    const { dialed, opened } = await this.endpoint.preDial(this.o.job, links);
    if (dialed > 0) {
      this.o.log(`volunteer: dialed ${dialed} link${dialed === 1 ? '' : 's'} ahead for the coming ring `
        + `(${opened} open in ${Math.round(performance.now() - t0)} ms)`);
    }
    this.o.send({ type: 'prepared', peerId: this.o.peerId, id: m.id });
  }

  /** The session ended: every link closes, and a ring still forming is given up. */
  close(): void {
    this.ring?.close();
    this.ring = null;
    this.supersede?.();
  }

  /** The assignment's ring (formed now if needed); null when superseded or failed (reported). */
  async join(a: StepAssignment): Promise<StepRings | null> {
    if (a.direct) this.endpoint.learnRoutes(a.direct);
    if (this.ring) {
      this.ring.setDeadMs(a.deadMs);
      return this.ring;
    }
    let ring: StepRings | null;
    const t0 = performance.now();
    try {
      ring = await this.form(a);
    } catch (e) {
      this.failed(e, a);
      return null;
    }
    if (!ring) return null;
    this.ring = ring;
    ring.setDeadMs(a.deadMs);
    if (ring.size > 1) {
      this.linked = true;
      const relays = relayHostsOf(this.o.iceServers);
      const t1 = performance.now();
      const [next, prev] = await Promise.all([ring.next?.route?.(relays), ring.prev?.route?.(relays)]);
      const t2 = performance.now();
      // A newer assignment may have closed this ring while its links were looked at.
      if (this.ring !== ring) {
        this.o.log(`volunteer: the ring of generation ${a.generation} was closed as it formed (the coordinator has moved on)`);
        return null;
      }
      this.links = { next: next ?? null, prev: prev ?? null };
      this.o.log(`volunteer: ring of ${ring.size}: link to ${ring.next?.remoteId ?? '?'} ${next ?? 'unknown'}, `
        + `from ${ring.prev?.remoteId ?? '?'} ${prev ?? 'unknown'}`);
      this.o.log(`volunteer: ring of generation ${a.generation}: ${ring.links.reused} links reused, ${ring.links.total - ring.links.reused} new `
        + `(formed in ${Math.round(t1 - t0)} ms, routes read in ${Math.round(t2 - t1)} ms; ${ring.links.dials} dials, ${ring.links.offers} offers)`);
    }
    return ring;
  }

  /** Forms the assignment's ring, or gives up (null) when a newer assignment arrives first. */
  private async form(a: StepAssignment): Promise<StepRings | null> {
    const formed = formStepRings(this.endpoint, a, { deadAfterMs: this.o.deadAfterMs, stallTimeoutMs: 120_000 }, this.o.wire, this.o.ringFormMs);
    const superseded = new Promise<null>((resolve) => { this.supersede = () => resolve(null); });
    try {
      const ring = await Promise.race([formed, superseded]);
      if (ring === null) {
        // Its neighbours have moved on too; release it if it forms after all (the endpoint's pool
        // keeps its links for a newer ring of the same neighbours, else closes them).
        formed.then((late) => late.release(), () => undefined);
        this.o.log(`volunteer: gave up forming the ring of generation ${a.generation} (the coordinator has moved on)`);
      }
      return ring;
    } finally {
      this.supersede = null;
    }
  }

  /** A ring that failed: tell the coordinator whom it blames, unless we closed it ourselves. */
  failed(e: unknown, a: StepAssignment): void {
    if (!isRingError(e)) throw e;
    if (e.kind !== 'closed') {
      this.o.log(`volunteer: step ${a.step + 1} generation ${a.generation}: ${e.message}`);
      // An ABORT passed on by a neighbour names the peer to blame and the original failure: report
      // that, before the release below closes links (the neighbours then report them closed, and
      // the coordinator should hear the cause first).
      this.o.send({
        type: 'collective-failure', peerId: this.o.peerId, generation: a.generation, step: a.step, failedPeerId: e.peerId, kind: e.origin,
        detail: failureDetail(e.message),
      });
    } else {
      // Preempted by a newer assignment: nothing to report.
      this.o.log(`volunteer: step ${a.step + 1} generation ${a.generation}: collective ended, the coordinator moved on`);
    }
    // Released: the link to the peer it blames is closed, the others may serve the next generation.
    this.ring?.release();
    this.ring = null;
  }
}

/** `self`'s successor and predecessor in each ring of a planned generation: the links it dials ahead (null: not in it). */
export function aheadLinks(m: Pick<PrepareRing, 'ring' | 'topology'>, self: string): PreDial[] | null {
  const around = (ids: readonly string[], tag: string): PreDial[] => {
    const n = ids.length < 2 ? null : neighboursOf(ids, self);
    return n ? [{ tag, ...n }] : [];
  };
  if (!m.ring.includes(self)) return null;
  if (!m.topology) return around(m.ring, '');
  const role = roleOf(m.topology, self);
  return [...around(role.groupIds, 'group'), ...(role.columnIds ? around(role.columnIds, 'column') : [])];
}
