// One generation's ring links at one peer, as a small state machine (PeerEndpoint runs one per
// job at a time):
//
//   forming --(the current dial to next is open AND the current link from prev is open,
//              neither closed since)------------------------------------------> formed
//   forming --(timeout | next unknown to signaling | MAX_DIALS failed dials
//              | cancel: a newer generation, or this peer leaves)------------> failed
//
// Next: a dial that fails is re-dialed at once (MAX_DIALS in all); one that closes after it
// opened, before the hand-over, is re-dialed too. Prev: prev re-dials only when its side of an
// attempt failed, so a newer incoming attempt replaces the older one (closed) while forming.
// The hand-over is the one moment both links are chosen; from then on (and once failed) every
// incoming attempt is refused (closed unread), so a ring only ever reads the links it was given
// and no link it was given is closed or replaced by formation.
//
// Reuse (link-pool.ts): the link to next may first be asked of the pool (reuseNext); formation
// dials only once that resolves null. A link from prev that the pool adopted is offered like an
// incoming attempt. A formation that fails closes the links it holds, adopted ones included.
//
// Hedge: a dial whose ICE is up but whose channel has not opened HEDGE_FACTOR times the ICE time
// later (at least HEDGE_MIN_MS) is closed and re-dialed, at most MAX_HEDGES times per formation.
// libdatachannel (node-datachannel 0.33, libdatachannel 0.24.5) drops a DTLS ClientHello that
// arrives before the answerer has set up its DTLS transport, and the client sends it again only
// after 1 s: about 1 new link in 5 on this loaded machine took ~1 s instead of 10-70 ms
// (libdatachannel PR #1554 fixes it upstream). A fresh attempt rolls the race again.

import { RingError } from './errors.ts';
import type { Link } from './link.ts';

/** Connection attempts per outgoing link. */
export const MAX_DIALS = 8;

/** Closed and re-dialed (see the header) at most this often per formation. */
export const MAX_HEDGES = 2;
/**
 * A dial is hedged once its channel is this many times its ICE time late after ICE... The ICE
 * time (dial to ICE up: the offer and answer through signaling, then a check) is 2-3 round
 * trips; DTLS, SCTP and the channel's open after it take about 5: 3 ICE times leave room on a
 * slow network, and still hedge at about 0.2 s here instead of waiting for the 1 s resend.
 */
export const HEDGE_FACTOR = 3;
/** ...and at least this late (DTLS, SCTP and the channel's open take 0-60 ms after ICE here). */
export const HEDGE_MIN_MS = 150;

/** A link as formation sees it: one that says when it opened (PeerJsLink, or a kept link's lease). */
export interface FormingLink extends Link {
  readonly opened: Promise<void>;
  /** Resolves when its ICE connectivity is up, before DTLS and the channel (absent: not known). */
  readonly iceConnected?: Promise<void>;
  /** Its connection's states in a few words, for a formation that timed out (absent: nothing to say). */
  describe?(): string;
}

export interface FormationInit<L extends FormingLink> {
  selfId: string;
  job: number;
  generation: number;
  nextId: string;
  prevId: string;
  /** Starts one connection attempt to next; throws RingError when PeerJS cannot. */
  dial(): L;
  /**
   * Called once, first: a link to next kept from an earlier generation, resolved once the remote
   * agreed to keep it (open), or null (then formation dials); never rejects. Returning null
   * instead of a promise: nothing to try, dial at once.
   */
  reuseNext?(f: LinkFormation<L>): Promise<L | null> | null;
  /** Both links must be open within this time, or formation fails 'connect-failed'. */
  timeoutMs: number;
}

export interface FormedLinks<L extends FormingLink> {
  next: L;
  prev: L;
  /** Connection attempts this peer made to next, and attempts from prev it was offered (logs: a re-dial shows here). */
  attempts: { dials: number; offers: number };
}

export class LinkFormation<L extends FormingLink> {
  readonly job: number;
  readonly generation: number;
  readonly nextId: string;
  readonly prevId: string;
  /** Resolves once, at the hand-over; rejects with the RingError that ended formation. */
  readonly done: Promise<FormedLinks<L>>;
  private state: 'forming' | 'formed' | 'failed' = 'forming';
  private out: L | null = null;
  private outOpen = false;
  private dials = 0;
  private incoming: L | null = null;
  private inOpen = false;
  private offers = 0;
  private hedges = 0;
  private hedgeTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly timer: ReturnType<typeof setTimeout>;
  private resolve: (links: FormedLinks<L>) => void = () => undefined;
  private reject: (e: RingError) => void = () => undefined;

  private readonly startedAt = performance.now();
  /** Dials whose link closed after both ends had opened it (re-dialed by settle). */
  private closedAfterOpen = 0;

  /** Starts the timeout and dialing next (or asking the pool for a kept link to it) at once. */
  constructor(private readonly o: FormationInit<L>) {
    this.job = o.job;
    this.generation = o.generation;
    this.nextId = o.nextId;
    this.prevId = o.prevId;
    this.done = new Promise<FormedLinks<L>>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.timer = setTimeout(() => {
      const who = this.outOpen ? o.prevId : o.nextId;
      const what = `no open data connection ${this.outOpen ? 'from' : 'to'} it within ${o.timeoutMs} ms`;
      this.fail(new RingError('connect-failed', who, `${what} (${this.states()})`, o.selfId));
    }, o.timeoutMs);
    const kept = o.reuseNext?.(this) ?? null;
    // The pool resolves null for every way a reuse attempt ends without a link (it never rejects).
    if (!kept) this.redial('');
    else void kept.then((l) => (l ? this.useNext(l) : this.redial('')));
  }

  get forming(): boolean {
    return this.state === 'forming';
  }

  /** An incoming attempt from prev for this (job, generation): taken while forming, else refused. */
  offer(l: L): void {
    if (this.state !== 'forming') return l.close();
    this.offers++;
    this.incoming?.close(); // superseded: prev re-dials only once its side of the attempt failed
    this.incoming = l;
    this.inOpen = false;
    // A failed attempt needs nothing here: prev dials again, or the timeout reports it.
    l.opened.then(() => {
      if (this.incoming !== l) return;
      this.inOpen = true;
      this.settle();
    }, () => undefined);
  }

  /** PeerJS's 'peer-unavailable' error; its message ends with the peer id it could not reach. */
  unavailable(message: string): void {
    // Only our own next, matched exactly ("... peer p12" is not about p1), and only while no
    // dial to it is open (an open one shows the signaling server knows it).
    if (this.state !== 'forming' || this.outOpen || !message.endsWith(` ${this.nextId}`)) return;
    this.fail(new RingError('connect-failed', this.nextId, `signaling server does not know ${this.nextId}`, this.o.selfId));
  }

  /** Ends formation blaming nobody (a newer generation, or this peer leaving); closes its links. */
  cancel(why: string): void {
    this.fail(new RingError('closed', this.o.selfId, why, this.o.selfId));
  }

  private redial(why: string): void {
    if (this.state !== 'forming') return;
    if (this.dials >= MAX_DIALS) {
      // How long the attempts took and how many had opened first tell a remote that refuses at once from one that is slow.
      const took = `${Math.round(performance.now() - this.startedAt)} ms`;
      const after = this.closedAfterOpen > 0 ? `, ${this.closedAfterOpen} of them closed after opening` : '';
      this.fail(new RingError('connect-failed', this.nextId,
        `${this.dials} connection attempts failed in ${took}${after}, the last one: ${why} (${this.states()})`, this.o.selfId));
      return;
    }
    let link: L;
    try {
      link = this.o.dial();
    } catch (e) {
      if (!(e instanceof RingError)) throw e;
      this.fail(e);
      return;
    }
    this.dials++;
    this.useNext(link);
    this.hedge(link, performance.now());
  }

  /** Closes `link` (a dial made at `dialedAt`) if its channel is late after its ICE is up: it fails, and is re-dialed. */
  private hedge(link: L, dialedAt: number): void {
    if (!link.iceConnected || this.hedges >= MAX_HEDGES) return;
    link.iceConnected.then(() => {
      if (this.out !== link || this.outOpen || this.state !== 'forming') return;
      const wait = Math.max(HEDGE_MIN_MS, HEDGE_FACTOR * (performance.now() - dialedAt));
      if (this.hedgeTimer) clearTimeout(this.hedgeTimer);
      this.hedgeTimer = setTimeout(() => {
        this.hedgeTimer = null;
        if (this.out !== link || this.outOpen || this.state !== 'forming' || this.hedges >= MAX_HEDGES) return;
        this.hedges++;
        link.close(); // its `opened` rejects: useNext re-dials
      }, wait);
    }, () => undefined);
  }

  /** Waits for `link` to next to open (a kept one is open already); re-dials if it fails first. */
  private useNext(link: L): void {
    if (this.state !== 'forming') return link.close();
    this.out = link;
    this.outOpen = false;
    link.opened.then(() => {
      if (this.out !== link || this.state !== 'forming') return;
      this.outOpen = true;
      this.settle();
    }, (e: unknown) => {
      if (this.out === link) this.redial(e instanceof Error ? e.message : String(e));
    });
  }

  /** Hands both links over if both current ones are open and still so. */
  private settle(): void {
    const { out, incoming } = this;
    if (this.state !== 'forming' || !out || !incoming || !this.outOpen || !this.inOpen) return;
    if (out.closed) {
      this.closedAfterOpen++;
      return this.redial('the connection closed after it opened');
    }
    if (incoming.closed) {
      // Prev's side failed after ours opened: it re-dials, or the timeout reports it.
      this.incoming = null;
      this.inOpen = false;
      return;
    }
    this.state = 'formed';
    clearTimeout(this.timer);
    if (this.hedgeTimer) clearTimeout(this.hedgeTimer);
    this.resolve({ next: out, prev: incoming, attempts: { dials: this.dials, offers: this.offers } });
  }

  /** Where formation stands, for the timeout's message: each side's attempts, whether its current link opened, and its states. */
  private states(): string {
    const side = (l: L | null, open: boolean) => (l === null ? 'none' : open ? 'open' : `not open${l.describe ? `: ${l.describe()}` : ''}`);
    const next = `to next: ${this.dials} dials, ${this.hedges} hedged, ${side(this.out, this.outOpen)}`;
    return `${next}; from prev: ${this.offers} offers, ${side(this.incoming, this.inOpen)}`;
  }

  private fail(e: RingError): void {
    if (this.state !== 'forming') return;
    this.state = 'failed';
    clearTimeout(this.timer);
    if (this.hedgeTimer) clearTimeout(this.hedgeTimer);
    this.out?.close();
    this.incoming?.close();
    this.reject(e);
  }
}
