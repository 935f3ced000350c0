// The ring's generations as the training driver (driver.ts) forms them: each membership change
// begins a new one, planned from the job's twoLevelFrom peers on in groups by measured links
// (two-level.ts) with the ring in their order, and recorded for the dashboard. Also when
// waiting joiners enter: at once in a calm or small ring, batched while the ring churns.
import type { LiveEvent, MetricRecord } from '../src/protocol/messages.ts';
import type { Topology } from '../src/comm/topology.ts';
import type { PeerRec } from './driver-peers.ts';
import { donorKey } from './credit.ts';
import { planGeneration } from './two-level.ts';

/**
 * Rings smaller than this admit joiners at once even under churn: there a membership change is
 * cheap and rare, and each joiner is a large share of the ring (a short job would end first).
 */
export const ADMIT_BATCH_FROM = 8;

/**
 * Under churn a member that asked to leave after its step trains on for at most this many
 * admission gaps, and at most LEAVE_HOLD_MAX_MS, waiting to go with the next admission.
 */
export const LEAVE_HOLD_GAPS = 3;

/**
 * The longest a leaver is held (leaveHoldMs). The volunteer itself leaves 15 s after it asked
 * (LEAVE_AFTER_STEP_MS in src/client/volunteer-session.ts): held for longer, it would go as a
 * lost peer (an abort) instead of at a commit. 10 s leaves room for the announcement's wait
 * (prepareMs) and a step.
 */
export const LEAVE_HOLD_MAX_MS = 10_000;

/** How long a leaver may be held under churn when joiners are batched `gapMs` apart. */
export function leaveHoldMs(gapMs: number): number {
  return Math.min(LEAVE_HOLD_GAPS * gapMs, LEAVE_HOLD_MAX_MS);
}

export class Generations {
  private current: number;
  private members: string[] = [];
  private plan: Topology | null = null;
  /** A generation planned ahead (prepare): taken by next() when its members are the same. */
  private ahead: { ring: string[]; topology: Topology | null } | null = null;
  /** When the newest generation and the one before it began (joiner batching). */
  private at = 0;
  private previousAt = 0;

  /** `first`: the generation before the first one formed here (after a restart: the newest used before). */
  constructor(first: number, private readonly twoLevelFrom: number) {
    this.current = first;
  }

  get generation(): number { return this.current; }
  /** The generation's ring, in rank order. */
  get ring(): readonly string[] { return this.members; }
  /** The generation's two-level plan (its groups, in order, are `ring`), or null: a flat ring. */
  get topology(): Topology | null { return this.plan; }

  /** The generation planned ahead, if any (signaling lets its neighbours connect too). */
  get prepared(): { ring: readonly string[]; topology: Topology | null } | null {
    return this.ahead;
  }

  /**
   * Plans the generation of `ring` now (make before break: driver-ahead.ts), to be begun later
   * by next() over the same members even if the measured links change meanwhile.
   */
  prepare(ring: readonly string[], peers: ReadonlyMap<string, PeerRec>): { ring: string[]; topology: Topology | null } {
    this.ahead = this.planOf(ring, peers, this.plan);
    return this.ahead;
  }

  /**
   * The generation planned ahead without `ids` (lost meanwhile), adapted as any generation is
   * (stable-plan.ts: most neighbours stay), so the links dialed ahead mostly still serve; null
   * (and forgotten) when nobody would be left.
   */
  prepareWithout(ids: readonly string[], peers: ReadonlyMap<string, PeerRec>): { ring: string[]; topology: Topology | null } | null {
    const a = this.ahead;
    if (!a) return null;
    const ring = a.ring.filter((id) => !ids.includes(id));
    this.ahead = ring.length ? this.planOf(ring, peers, a.topology) : null;
    return this.ahead;
  }

  /** The plan of a generation over `ring` by the peers' measured links, adapted from `previous` where it can be. */
  private planOf(ring: readonly string[], peers: ReadonlyMap<string, PeerRec>, previous: Topology | null): { ring: string[]; topology: Topology | null } {
    return planGeneration(ring, (id) => peers.get(id)?.links, this.twoLevelFrom, previous);
  }

  /** Forgets the generation planned ahead (it will not come). */
  dropPrepared(): void {
    this.ahead = null;
  }

  /**
   * Begins the next generation over `ring` at `now`, unless `ring` is the current ring (null);
   * returns its metrics record and live event. Over the members of the generation planned
   * ahead, that plan (its order and groups) is the one begun. `flat`: one flat ring in this order
   * whatever the job's two-level plans (a verified step whose hops must be checked).
   */
  next(ring: readonly string[], peers: ReadonlyMap<string, PeerRec>, now: number, flat = false): { record: MetricRecord; event: LiveEvent } | null {
    const same = ring.length === this.members.length && ring.every((id, i) => id === this.members[i]);
    if (same && (!flat || this.plan === null)) return null;
    if (flat) {
      this.ahead = null;
      this.members = [...ring];
      this.plan = null;
      return this.again(peers, now);
    }
    const ahead = this.ahead;
    const planned = ahead !== null && ahead.ring.length === ring.length && ring.every((id) => ahead.ring.includes(id));
    if (planned) this.ahead = null;
    // From the job's twoLevelFrom peers on: groups by measured links, and the ring in their order.
    const { ring: members, topology } = planned ? ahead : this.planOf(ring, peers, this.plan);
    this.members = members;
    this.plan = topology;
    return this.again(peers, now);
  }

  /** Begins a new generation over the current members in the current plan (alone: its rings are formed again, blame.ts formAgain). */
  again(peers: ReadonlyMap<string, PeerRec>, now: number): { record: MetricRecord; event: LiveEvent } {
    const { members, plan: topology } = this;
    this.current++;
    this.previousAt = this.at;
    this.at = now;
    const info = members.map((id) => {
      const p = peers.get(id);
      return { id, name: p?.name ?? null, device: p?.device ?? '', donor: donorKey(id, p?.name ?? null, p?.donor) };
    });
    // The plan goes out with the ring (absent when flat, as older records are) for the dashboard.
    const shape = topology ? { topology } : {};
    return {
      record: { type: 'generation', time: now, generation: this.current, ring: members, peers: info, ...shape },
      // Watchers see who is in the ring, not under which key each is credited.
      event: { type: 'generation', generation: this.current, ring: members, peers: info.map(({ donor: _, ...p }) => p), ...shape },
    };
  }

  /**
   * Whether joiners waiting since `waitingSince` enter at this boundary. Batched: under churn
   * (the last two generations began within `gapMs`) in a ring of ADMIT_BATCH_FROM or more,
   * joiners wait up to `gapMs`, so that those who came meanwhile enter together in one new
   * generation.
   */
  admitDue(waitingSince: readonly number[], gapMs: number, now: number): boolean {
    return this.due(waitingSince, gapMs, gapMs, now);
  }

  /**
   * Whether members that asked to leave after their step (since `leavingSince`) go at this
   * boundary when nobody is admitted at it: at once in a calm or small ring; under churn once
   * the first of them has waited `holdMs` (until then they train on, and go with the next
   * admission: one new generation for both).
   */
  leaveDue(leavingSince: readonly number[], gapMs: number, holdMs: number, now: number): boolean {
    return this.due(leavingSince, gapMs, holdMs, now);
  }

  /**
   * A membership change waiting since `since` is made now: in a ring under ADMIT_BATCH_FROM, in
   * a calm one (the last two generations did not both begin within `gapMs`), or once the first
   * of them has waited `holdMs`.
   */
  private due(since: readonly number[], gapMs: number, holdMs: number, now: number): boolean {
    const churning = now - this.at < gapMs && this.at - this.previousAt < gapMs;
    return this.members.length < ADMIT_BATCH_FROM || !churning || since.some((t) => now - t >= holdMs);
  }
}
