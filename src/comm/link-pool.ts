// Ring links kept open between generations, and the handshake that moves one into the next
// generation's ring (PeerEndpoint runs one pool).
//
// Every ring link formed by PeerEndpoint.formRing is a KeptLink (link-lease.ts) of one job and
// ring tag, held at this end as 'next' (we dialed it and send data on it) or 'prev'. A ring that
// ends because the coordinator moved on, or failed not because of that neighbour, releases its
// links here instead of closing them. When this peer forms a later generation of the same job
// and tag, the end that sends data (A, whose next is again B) asks to keep the link, and B agrees
// only if its own formation of that generation expects A as prev:
//
//   A: sends REUSE(job, g, tag)        B: keeps the offer until its formation of g runs and the
//                                          link is idle (its old ring may still hold it), then
//                      <- REUSE_ACK        answers
//   A: adopts it as next,
//      sends REUSE_CONFIRM ->          B: adopts it as prev
//
// Three steps so that neither side adopts a link the other may still give up on: A gives up
// (closes the link, then dials as it would have) when no ACK comes within REUSE_ACK_MS or the
// link closes; B adopts only on CONFIRM, which A sends only once it has adopted. B refuses by
// closing the link when its ring of that generation expects someone else as prev, or when a
// CONFIRM comes that it did not ACK; an offer for a generation B has left behind is dropped
// (A moves on too, or gives up). B never waits for A: it expects A's REUSE or A's dial, as
// before, and A does one of them within REUSE_ACK_MS, so the handshake never costs more than
// that bound.
// The handshake frames also split the link's stream: each end hands its new ring only what
// arrives after the frame that made it adopt (ACK at A, CONFIRM at B), which the other end sent
// after it had stopped its old ring; so a reused link never carries an older generation's frame
// into the new ring (which would drop it unread anyway).
//
// A link dialed ahead for a ring that has not formed yet (PeerEndpoint.preDial) enters the pool
// idle (park), at both ends, and is taken by the same handshake.
//
// Bounds: an idle link is closed when a formation of its job and tag completes without it, or
// MAX_IDLE_MS after it was released; a link dialed ahead that no ring has held yet waits
// PARKED_IDLE_MS instead (the change it was dialed for is made only after a joiner has loaded
// the checkpoint, which can take far longer than a released link's wait). A formation that ends while its handshake is under way
// leaves the link idle (a newer generation may still take it); a link a formation had adopted
// is closed with that formation (link-formation.ts fail). destroy closes everything.

import { KeptLink, type KeptLinkOwner, type LinkLease, type LinkRole } from './link-lease.ts';
import type { PeerJsLink } from './peerjs-link.ts';
import type { LinkPhase } from './link-machine.ts';
import { FrameKind, parseReuse, reuseFrame, type ReuseNotice } from '../protocol/frames.ts';

/** How long A waits for B's ACK before it closes the kept link and dials. */
export const REUSE_ACK_MS = 1500;
/** An idle link older than this is closed (no formation of its job and tag took it). */
export const MAX_IDLE_MS = 10_000;
/**
 * A link dialed ahead (park) that no ring has held yet is closed after this long idle: the
 * announced change waits for every member's `prepared`, one more step and the joiners' loading
 * (the coordinator's default admitMs is 120 s). At 10 s, a loaded machine closed such links
 * before the change came, and the new ring dialed them again.
 */
export const PARKED_IDLE_MS = 120_000;

/** What the pool needs of a formation (LinkFormation). */
export interface ReuseFormation {
  readonly job: number;
  readonly generation: number;
  readonly nextId: string;
  readonly prevId: string;
  readonly forming: boolean;
  /** An incoming link from prev, open. */
  offer(l: LinkLease): void;
}

/** What the pool asks the endpoint. */
export interface PoolHost {
  /** The formation running for this job and tag with reuse, if any. */
  formation(job: number, tag: string): ReuseFormation | undefined;
  /** Newest generation of the job that a formation started for here (0: none). */
  newest(job: number): number;
}

/** The link's phase (link-machine.ts) for each state of its entry: the pool's one setter (LinkPool.to) moves both. */
const PHASE = { held: 'Leased', idle: 'Idle', offering: 'Offering', acked: 'Acked' } as const satisfies Record<State['kind'], LinkPhase>;

type State =
  | { kind: 'held' }
  | { kind: 'idle' }
  /** A: REUSE sent for f; `settle` hands the outcome to f's reuseNext. */
  | { kind: 'offering'; f: ReuseFormation; settle: (lease: LinkLease | null) => void }
  /** B: ACK sent for this generation; waiting for CONFIRM (live while a formation of it runs). */
  | { kind: 'acked'; generation: number };

interface Entry {
  readonly kept: KeptLink;
  state: State;
  /** B: the generation a REUSE asked for, kept until a formation of it can answer. */
  offered: number | null;
  /** Closes the link once it has been idle MAX_IDLE_MS (PARKED_IDLE_MS while `parked`). */
  idleTimer: ReturnType<typeof setTimeout> | null;
  /** Dialed ahead and not held by a ring yet. */
  parked: boolean;
}

export class LinkPool implements KeptLinkOwner {
  private readonly entries = new Map<KeptLink, Entry>();

  constructor(private readonly host: PoolHost) {}

  /** Open kept links (held by a ring, idle, or in a handshake): tests count them. */
  get size(): number {
    return this.entries.size;
  }

  /** How many are idle or in a handshake (held by no ring). */
  get idle(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.state.kind !== 'held') n++;
    return n;
  }

  /** Keeps a freshly formed link of (job, tag) at this end as `role`, lent to its first ring. */
  keep(base: PeerJsLink, job: number, tag: string, role: LinkRole): LinkLease {
    const kept = new KeptLink(base, job, tag, role, this);
    const e: Entry = { kept, state: { kind: 'held' }, offered: null, idleTimer: null, parked: false };
    this.entries.set(kept, e);
    this.to(e, { kind: 'held' });
    return kept.lend();
  }

  /**
   * Make before break: a link dialed (or accepted) for a ring that has not formed yet, kept idle
   * as `role` of (job, tag) until a formation of that ring takes it by the handshake above, or
   * MAX_IDLE_MS passes. The link must be open.
   */
  park(base: PeerJsLink, job: number, tag: string, role: LinkRole): void {
    const kept = new KeptLink(base, job, tag, role, this);
    const e: Entry = { kept, state: { kind: 'idle' }, offered: null, idleTimer: null, parked: true };
    this.entries.set(kept, e);
    this.toIdle(e);
    // Held by nobody: the link listens from now on (handshake frames reach the pool, a REUSE that came first is answered now).
    kept.listen();
  }

  /** Whether an open link of (job, tag) to `remoteId` is kept here as `role`, held by a ring or not. */
  has(job: number, tag: string, role: LinkRole, remoteId: string): boolean {
    for (const k of this.entries.keys()) if (k.job === job && k.tag === tag && k.role === role && k.remoteId === remoteId && !k.closed) return true;
    return false;
  }

  /**
   * A's side: the idle link to f's next, kept from a ring of this job and tag, offered to the
   * remote for f's generation. Null: none to offer (dial at once). Else resolves the adopted
   * lease, or null when the remote did not agree in time (the link is then closed) or f ended.
   */
  reuseNext(f: ReuseFormation, tag: string): Promise<LinkLease | null> | null {
    const e = this.find(f.job, tag, 'next', f.nextId);
    if (!e) return null;
    this.stopIdle(e);
    return new Promise<LinkLease | null>((resolve) => {
      const settle = (lease: LinkLease | null): void => {
        clearTimeout(timer);
        resolve(lease);
      };
      const timer = setTimeout(() => {
        if (e.state.kind !== 'offering' || e.state.settle !== settle) return;
        // Its formation gone: idle again, for a newer one. Still forming: B did not answer, give up.
        if (!f.forming) this.toIdle(e);
        else e.kept.close();
      }, REUSE_ACK_MS);
      this.to(e, { kind: 'offering', f, settle });
      e.kept.send(reuseFrame({ kind: FrameKind.reuse, job: f.job, generation: f.generation, tag }));
    });
  }

  /** B's side: f (of this job and tag) has started; answer a REUSE from its prev that came first. */
  expectPrev(f: ReuseFormation, tag: string): void {
    const e = this.find(f.job, tag, 'prev', f.prevId);
    if (e) this.answer(e);
  }

  /** A formation of (job, tag) ended: handshakes that were for it are over (their links idle again). */
  ended(f: ReuseFormation): void {
    for (const e of this.entries.values()) this.settleDead(e, f);
  }

  /** A formation of (job, tag) handed its links over: every other idle link of (job, tag) goes. */
  formed(job: number, tag: string): void {
    for (const e of [...this.entries.values()]) {
      if (e.kept.job === job && e.kept.tag === tag && e.state.kind !== 'held') e.kept.close();
    }
  }

  /** Closes every kept link, held or not (the endpoint leaves). */
  closeAll(): void {
    for (const e of [...this.entries.values()]) e.kept.close();
  }

  // ---- KeptLinkOwner ---------------------------------------------------------------------

  released(kept: KeptLink): void {
    const e = this.entries.get(kept);
    if (!e) return;
    this.toIdle(e);
    // A REUSE may have come while the old ring still held the link.
    this.answer(e);
  }

  closed(kept: KeptLink): void {
    const e = this.entries.get(kept);
    if (!e) return;
    this.entries.delete(kept);
    this.stopIdle(e);
    const s = e.state;
    // The link is Closed already (its machine stays so): only the entry's state changes.
    this.to(e, { kind: 'idle' });
    if (s.kind === 'offering') s.settle(null);
  }

  control(kept: KeptLink, frame: Uint8Array): void {
    const e = this.entries.get(kept);
    if (!e) return;
    const n = parseReuse(frame);
    // Not a handshake we can read: the holder judges it as any frame (a ring blames its sender).
    if (!n) return e.state.kind === 'held' ? kept.deliver(frame) : kept.close();
    // A handshake for another ring than this link's: the remote is confused; end the link.
    if (n.job !== kept.job || n.tag !== kept.tag) return this.refuse(e);
    if (n.kind === FrameKind.reuse) this.onReuse(e, n);
    else if (n.kind === FrameKind.reuseAck) this.onAck(e, n);
    else this.onConfirm(e, n);
  }

  // ---- the handshake ---------------------------------------------------------------------

  /** B: A asks to keep its link to us for generation n.generation. */
  private onReuse(e: Entry, n: ReuseNotice): void {
    if (e.kept.role !== 'prev') return this.refuse(e);
    e.offered = n.generation;
    this.answer(e);
  }

  /** B: answers the offer when the link is idle and a formation of the offered generation expects its remote as prev. */
  private answer(e: Entry): void {
    this.settleDead(e);
    const g = e.offered;
    if (g === null) return;
    const { job, tag } = e.kept;
    const ack = (): void => {
      e.offered = null;
      e.kept.send(reuseFrame({ kind: FrameKind.reuseAck, job, generation: g, tag }));
    };
    // A asked again (its formation of g was started anew): the same answer.
    if (e.state.kind === 'acked' && e.state.generation === g) return ack();
    if (e.state.kind !== 'idle') return; // an old ring still holds it: answered on release
    const f = this.host.formation(job, tag);
    if (!f || f.generation !== g || !f.forming) {
      // Not started yet: keep the offer. A generation this peer has left behind: drop it (A
      // moves on too, or gives up after REUSE_ACK_MS); the link stays idle for a newer offer.
      if (g <= this.host.newest(job)) e.offered = null;
      return;
    }
    if (f.prevId !== e.kept.remoteId) return this.refuse(e);
    this.stopIdle(e);
    this.to(e, { kind: 'acked', generation: g });
    ack();
  }

  /** A: B agreed; adopt the link and confirm before the new ring sends anything on it. */
  private onAck(e: Entry, n: ReuseNotice): void {
    const s = e.state;
    if (e.kept.role !== 'next') return this.refuse(e);
    // An answer to an offer we no longer make (an abandoned generation's): ignored.
    if (s.kind !== 'offering' || s.f.generation !== n.generation || !s.f.forming) return;
    const lease = e.kept.lend();
    this.to(e, { kind: 'held' });
    e.parked = false;
    e.kept.send(reuseFrame({ kind: FrameKind.reuseConfirm, job: n.job, generation: n.generation, tag: n.tag }));
    s.settle(lease);
  }

  /** B: A adopted the link; so do we, as the incoming link of the formation of the generation we acked. */
  private onConfirm(e: Entry, n: ReuseNotice): void {
    if (e.kept.role !== 'prev') return this.refuse(e);
    this.settleDead(e);
    const s = e.state;
    const f = this.host.formation(e.kept.job, e.kept.tag);
    // A adopted a link we are not taking (our formation of it is over): close it, so A's side knows.
    if (s.kind !== 'acked' || s.generation !== n.generation || !f) return this.refuse(e);
    const lease = e.kept.lend();
    this.to(e, { kind: 'held' });
    e.parked = false;
    f.offer(lease);
  }

  /** Closes a link we will not keep, unless a ring still holds it (that ring ends it). */
  private refuse(e: Entry): void {
    this.settleDead(e);
    if (e.state.kind === 'idle') e.kept.close();
  }

  // ---- states ----------------------------------------------------------------------------

  /** The idle entry of (job, tag, role, remote), if any (an ended formation's handshake counts as idle). */
  private find(job: number, tag: string, role: LinkRole, remoteId: string): Entry | null {
    for (const e of this.entries.values()) {
      const k = e.kept;
      if (k.job !== job || k.tag !== tag || k.role !== role || k.remoteId !== remoteId || k.closed) continue;
      this.settleDead(e);
      if (e.state.kind === 'idle') return e;
    }
    return null;
  }

  /**
   * A handshake is over once its formation is (or is `ended`): A's offer belongs to one
   * formation; B's answer to whichever formation of its job and tag runs that generation with
   * the link's remote as prev. Over: idle again.
   */
  private settleDead(e: Entry, ended?: ReuseFormation): void {
    const s = e.state;
    if (s.kind === 'offering' && (s.f === ended || !s.f.forming)) this.toIdle(e);
    if (s.kind === 'acked') {
      const f = this.host.formation(e.kept.job, e.kept.tag);
      if (!f || f === ended || !f.forming || f.generation !== s.generation || f.prevId !== e.kept.remoteId) this.toIdle(e);
    }
  }

  /** The one place an entry's state changes, and with it its link's phase (a closed link's stays Closed). */
  private to(e: Entry, s: State): void {
    e.state = s;
    e.kept.base.machine.go(PHASE[s.kind]);
  }

  private toIdle(e: Entry): void {
    const s = e.state;
    this.to(e, { kind: 'idle' });
    if (!e.idleTimer) {
      e.idleTimer = setTimeout(() => {
        e.idleTimer = null;
        this.settleDead(e);
        if (e.state.kind === 'idle') e.kept.close();
      }, e.parked ? PARKED_IDLE_MS : MAX_IDLE_MS);
    }
    if (s.kind === 'offering') s.settle(null);
  }

  private stopIdle(e: Entry): void {
    if (e.idleTimer) clearTimeout(e.idleTimer);
    e.idleTimer = null;
  }
}
