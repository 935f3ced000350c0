// Make before break: a planned membership change (joiners in, members that asked to leave out)
// of a big ring is announced before it is made. The coordinator plans the new generation's ring
// now (Generations.prepare), sends it to every member of it (`prepare`), and the current ring
// trains on while each peer dials its successors in the new ring (PeerEndpoint.preDial; the pool
// keeps those links idle at both ends). The change is made at the first step boundary after
// every member has answered `prepared` (or `prepareMs` has passed) and one more step ran: that
// step's assignments hint each member's slice of the new ring's first step (prefetch), and the
// joiners get theirs with their load-state. The new generation's
// rings then form from kept links by the REUSE handshake (milliseconds) instead of new WebRTC
// connections (0.1-1.2 s each on this machine), which the ring's first step would wait for.
// An unplanned loss (a crash, an eviction) of a member of the announced ring adapts it (the plan
// without that member, announced again: only the pairs around it dial anew), whether the change
// is still waiting or already being made (joiners loading).
import type { CoordinatorMessage, NextSlice } from '../src/protocol/messages.ts';
import type { Topology } from '../src/comm/topology.ts';

type Plan = { ring: readonly string[]; topology: Topology | null };

/** The announcement `id` of `plan` (with a joiner's first slice, when planned). */
const prepareOf = (id: number, plan: Plan, next?: NextSlice): CoordinatorMessage =>
  ({ type: 'prepare', id, ring: [...plan.ring], ...(plan.topology ? { topology: plan.topology } : {}), ...(next ? { next } : {}) });

/** A membership change announced ahead, not made yet. */
export interface AheadChange {
  readonly id: number;
  readonly joiners: readonly string[];
  readonly leavers: readonly string[];
  /** Members of the planned ring that have not said `prepared` yet. */
  readonly waiting: Set<string>;
  /** When it is made even if someone has not answered. */
  readonly deadline: number;
}

export class DialAhead {
  private change: AheadChange | null = null;
  /** The change is made at the next boundary (everyone answered, or the wait was over, at the last one). */
  private isArmed = false;
  private ids = 0;

  constructor(private readonly waitMs: number) {}

  /** Whether changes are announced at all (prepareMs > 0). */
  get enabled(): boolean {
    return this.waitMs > 0;
  }

  get pending(): AheadChange | null {
    return this.change;
  }

  /** Announces the change to the planned ring (Generations.prepare's plan): the messages to send, one per member of it. */
  begin(joiners: readonly string[], leavers: readonly string[], plan: Plan, now: number): Array<[string, CoordinatorMessage]> {
    const id = ++this.ids;
    this.change = { id, joiners: [...joiners], leavers: [...leavers], waiting: new Set(plan.ring), deadline: now + this.waitMs };
    this.isArmed = false;
    const message = prepareOf(id, plan);
    return plan.ring.map((peerId) => [peerId, message]);
  }

  /** The armed change's announcement again, to each joiner with its first slice (`hintFor`: planned ahead, or null). */
  joinerHints(plan: Plan | null, hintFor: (id: string) => NextSlice | null): Array<[string, CoordinatorMessage]> {
    const c = this.change;
    if (!c || !plan) return [];
    return c.joiners.flatMap((peerId): Array<[string, CoordinatorMessage]> => {
      const next = hintFor(peerId);
      return next ? [[peerId, prepareOf(c.id, plan, next)]] : [];
    });
  }

  /** A peer's `prepared` for announcement `id`. */
  prepared(peerId: string, id: number): void {
    if (this.change?.id === id) this.change.waiting.delete(peerId);
  }

  /**
   * The announced change, taken to be made now; null: train on. Once everyone has answered (or
   * the wait is over) one more step runs first, whose assignments hint the new ring's slices.
   */
  take(now: number): AheadChange | null {
    const c = this.change;
    if (!c) return null;
    if (!this.isArmed) {
      this.isArmed = c.waiting.size === 0 || now >= c.deadline;
      return null;
    }
    this.drop();
    return c;
  }

  /** Whether the announced change is made at the next boundary (its ring: Generations.prepared). */
  get armed(): boolean {
    return this.isArmed && this.change !== null;
  }

  /**
   * Members of the announced ring were lost: the change goes on without them over `plan` (the
   * announced plan adapted), announced again under a new id to its members (those already
   * answered for the old plan answer again, unless the change is made at the next boundary
   * anyway). Also when the change was taken already and is being made (nothing pending here):
   * the members dial the adapted ring's new pairs all the same. No plan (nobody left): dropped.
   */
  without(ids: readonly string[], plan: Plan | null): Array<[string, CoordinatorMessage]> {
    if (!plan) {
      this.drop();
      return [];
    }
    const id = ++this.ids;
    const c = this.change;
    if (c) {
      const keep = (xs: readonly string[]) => xs.filter((x) => !ids.includes(x));
      this.change = { id, joiners: keep(c.joiners), leavers: keep(c.leavers), waiting: new Set(this.isArmed ? [] : plan.ring), deadline: c.deadline };
    }
    const message = prepareOf(id, plan);
    return plan.ring.map((peerId) => [peerId, message]);
  }

  /** The announced ring will not be the next one. */
  drop(): void {
    this.change = null;
    this.isArmed = false;
  }
}
