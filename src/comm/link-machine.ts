// One peer link's life, from dial to close, as one state machine: where the connection is, and
// the only transitions between its phases. The tables below are the drawing in
// docs/architecture.md ("A peer link"), line for line (test/comm/link-machine.test.ts compares
// them). Each link (PeerJsLink) holds one `LinkMachine`; the link moves it through Dialing or
// Accepting to Open, the pool (link-pool.ts, through its one state setter) through Leased, Idle,
// Offering and Acked, and any close to Closed. A transition the table does not hold is a
// LinkStateError (a bug: the link's trail says how it got there). Closed is final: what happens
// to a closed link (an open event, a late settle) changes nothing.
//
// Who decides stays where it was: formation (link-formation.ts) which attempt is current, the
// endpoint (peer-endpoint.ts) which connection to take, the pool which idle link to offer, the
// ring (ring.ts) when to give a link back; this module only holds where the link is.
//
// The second region, on the dialing end, is whether the remote has been heard yet: PeerJsLink's
// `held` queue (Deaf while it holds sends). Its transitions are drawn too (HEARING_TRANSITIONS).

export type LinkPhase = 'Dialing' | 'Accepting' | 'Answered' | 'Open' | 'Leased' | 'Idle' | 'Offering' | 'Acked' | 'Closed';
export type HearingPhase = 'Deaf' | 'Hearing';

/** One arrow of the drawing ('start': from its [*]; 'end': to it). */
export interface LinkTransition<P extends string> {
  readonly from: P | 'start';
  readonly to: P | 'end';
  readonly on: string;
}

const t = (from: LinkPhase | 'start', to: LinkPhase | 'end', on: string): LinkTransition<LinkPhase> => ({ from, to, on });

/** Who owns the link, in the drawing's order. */
export const LINK_TRANSITIONS: readonly LinkTransition<LinkPhase>[] = [
  t('start', 'Dialing', 'LinkFormation.redial / preDial'),
  t('start', 'Accepting', "peer 'connection' with ring metadata"),
  t('Dialing', 'Open', 'channel open'),
  t('Accepting', 'Answered', 'channel open / send READY'),
  t('Answered', 'Open', "the dialing end's READY (any message)"),
  t('Answered', 'Closed', 'close, error, pc failed (the dialing end gave the attempt up)'),
  t('Accepting', 'Closed', 'refused (stranger, older generation, formation over) or superseded'),
  t('Dialing', 'Closed', 'close, error, pc failed, hedge, connect timeout, cancel'),
  t('Open', 'Closed', 'formation fails, superseded, closed after open'),
  t('Open', 'Leased', 'hand-over (settle, LinkPool.keep)'),
  t('Open', 'Idle', 'dialed ahead and open (LinkPool.park)'),
  t('Leased', 'Leased', 'ring fails (ABORT in, silence, bad frame): sends ABORT, reads nothing'),
  t('Leased', 'Idle', 'Ring.release, link open, remote not blamed'),
  t('Leased', 'Closed', 'Ring.close, blamed remote, remote closed, early overflow'),
  t('Idle', 'Offering', 'A - formation asks reuseNext / send REUSE(g)'),
  t('Idle', 'Acked', 'B - REUSE(g) and formation g expects remote / send ACK'),
  t('Offering', 'Leased', 'REUSE_ACK(g) while forming / send CONFIRM'),
  t('Offering', 'Idle', 'its formation ended'),
  t('Offering', 'Closed', 'no ACK in REUSE_ACK_MS, or B closed it (refused)'),
  t('Acked', 'Leased', 'REUSE_CONFIRM(g) / formation.offer'),
  t('Acked', 'Idle', 'formation of g over or changed'),
  t('Acked', 'Closed', '(job, tag) formed without it, remote closed'),
  t('Idle', 'Closed', 'idle timer, (job, tag) formed without it, refused, bad handshake'),
  t('Closed', 'end', ''),
];

/** On the dialing end, whether the remote has been heard (its sends wait until then). */
export const HEARING_TRANSITIONS: readonly LinkTransition<HearingPhase>[] = [
  { from: 'start', to: 'Deaf', on: 'end=dialed (sends queued)' },
  { from: 'start', to: 'Hearing', on: 'end=accepted' },
  { from: 'Deaf', to: 'Hearing', on: 'first message from remote (READY) / answer READY, flush queue' },
];

/** A link went where its state machine does not allow: a bug in the link's code. */
export class LinkStateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LinkStateError';
  }
}

/** How many transitions a link remembers for the error. */
const TRAIL = 8;

/** Where one link is (owned by its PeerJsLink). */
export class LinkMachine {
  private current: LinkPhase;
  private readonly recent: string[] = [];

  constructor(readonly remoteId: string, first: 'Dialing' | 'Accepting') {
    this.current = first;
  }

  get phase(): LinkPhase {
    return this.current;
  }

  /** The last transitions taken, oldest first ("Idle -> Offering"). */
  get trail(): readonly string[] {
    return [...this.recent];
  }

  /** Moves to `to`; from Closed nothing moves; a transition the table does not hold is a LinkStateError. */
  go(to: LinkPhase): void {
    const from = this.current;
    if (from === to || from === 'Closed') return;
    if (!LINK_TRANSITIONS.some((x) => x.from === from && x.to === to)) {
      throw new LinkStateError(`the link to ${this.remoteId} went from ${from} to ${to}, which its state machine does not allow `
        + `(src/comm/link-machine.ts; after ${this.recent.join(', ') || 'no transition'})`);
    }
    this.current = to;
    this.recent.push(`${from} -> ${to}`);
    if (this.recent.length > TRAIL) this.recent.shift();
  }
}
