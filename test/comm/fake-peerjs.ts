// Fake PeerJS for endpoint tests: peers, a signaling "net" and DataConnections whose messages
// reach the other end in order, a macrotask later. Each test decides, per dial, when each side's
// data channel opens, fails or closes (net.plan); by default every dial connects.
import { PeerEndpoint } from '../../src/comm/peer-endpoint.ts';
import type { ConnectOptionsLike, PeerLike } from '../../src/comm/peerjs-peer.ts';
import { LinkLease } from '../../src/comm/link-lease.ts';
import type { Link } from '../../src/comm/link.ts';
import { PeerJsLink, type DataConnectionLike } from '../../src/comm/peerjs-link.ts';

type Cb = (...args: never[]) => void;

class Emitter {
  private readonly cbs = new Map<string, Cb[]>();
  on(event: string, cb: Cb): this {
    this.cbs.set(event, [...(this.cbs.get(event) ?? []), cb]);
    return this;
  }
  protected emit(event: string, ...args: unknown[]): void {
    for (const cb of this.cbs.get(event) ?? []) (cb as (...a: unknown[]) => void)(...args);
  }
}

/** One end of a fake DataConnection. Messages reach the other end in order, a macrotask later. */
export class FakeConn extends Emitter implements DataConnectionLike {
  open = false;
  closed = false;
  other: FakeConn | null = null;
  readonly dataChannel = undefined;
  readonly peerConnection = null;
  constructor(readonly peer: string, readonly metadata: unknown) {
    super();
  }
  /** This end's channel opens. */
  openNow(): void {
    if (this.closed || this.open) return;
    this.open = true;
    this.emit('open');
  }
  /** A message handed to this end whatever its state: a stack that delivers one before this end's open event. */
  deliverNow(data: Uint8Array): void {
    this.emit('data', data.slice());
  }
  /** This end's attempt fails and the other end is not told (a one-sided DTLS/ICE failure). */
  fail(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.open = false;
    this.emit('error', new Error(why));
    this.emit('close');
  }
  send(data: Uint8Array): void {
    if (!this.open) return;
    const copy = data.slice();
    const to = this.other;
    setTimeout(() => { if (to?.open) to.emit('data', copy); }, 0);
  }
  close(): void {
    if (this.closed) return;
    this.fail('closed locally');
    const to = this.other;
    setTimeout(() => to?.fail('the remote end closed'), 0);
  }
}

/** One connect() call: its two ends, and the test's handles on them. */
export interface Dial {
  from: string;
  to: string;
  /** 1 for the first dial from `from` to `to`, 2 for the re-dial, ... */
  attempt: number;
  generation: number;
  dialer: FakeConn;
  answerer: FakeConn;
  /** The answerer's peer gets its 'connection' event. */
  deliver(): void;
  /** Both ends open. */
  open(): void;
}

export class FakePeer extends Emitter implements PeerLike {
  open = true;
  destroyed = false;
  constructor(readonly id: string, private readonly net: FakeNet) {
    super();
  }
  connect(peer: string, options: ConnectOptionsLike): DataConnectionLike {
    return this.net.dial(this.id, peer, options);
  }
  incoming(conn: FakeConn): void {
    this.emit('connection', conn);
  }
  /** What PeerJS emits when the signaling server answers an OFFER with EXPIRE. */
  unavailable(id: string): void {
    this.emit('error', Object.assign(new Error(`Could not connect to peer ${id}`), { type: 'peer-unavailable' }));
  }
  destroy(): void {
    this.destroyed = true;
  }
}

export class FakeNet {
  readonly peers = new Map<string, FakePeer>();
  readonly dials: Dial[] = [];
  /** What happens to each dial, a microtask after connect() returned: by default it connects. */
  plan: (d: Dial) => void = (d) => { d.deliver(); d.open(); };

  endpoint(id: string): PeerEndpoint {
    const p = new FakePeer(id, this);
    this.peers.set(id, p);
    return new PeerEndpoint(p);
  }

  dial(from: string, to: string, options: ConnectOptionsLike): FakeConn {
    const attempt = 1 + this.dials.filter((d) => d.from === from && d.to === to && d.generation === options.metadata.generation).length;
    const dialer = new FakeConn(to, options.metadata);
    const answerer = new FakeConn(from, options.metadata);
    dialer.other = answerer;
    answerer.other = dialer;
    const d: Dial = {
      from, to, attempt, generation: options.metadata.generation, dialer, answerer,
      deliver: () => this.peers.get(to)?.incoming(answerer),
      open: () => { answerer.openNow(); dialer.openNow(); },
    };
    this.dials.push(d);
    queueMicrotask(() => this.plan(d));
    return dialer;
  }

  peer(id: string): FakePeer {
    const p = this.peers.get(id);
    if (!p) throw new Error(`no fake peer ${id}`);
    return p;
  }
}

/** Lets every pending microtask and 0 ms timer run (fake connections deliver on those). */
export const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
};

/** Whether `p` settles within `ms`; the test then reads the outcome from `p` itself. */
export async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((r) => { timer = setTimeout(() => r(false), ms); });
  const done = p.then(() => true, () => true);
  try {
    return await Promise.race([done, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The PeerJsLink under a ring's link (a kept link's lease or a raw PeerJsLink). */
export function baseOf(link: Link | null): PeerJsLink {
  if (link instanceof LinkLease) return link.base;
  if (!(link instanceof PeerJsLink)) throw new Error('expected a PeerJsLink or a LinkLease');
  return link;
}

/** The fake connection under a ring's link. */
export function connOf(link: Link | null): DataConnectionLike {
  return baseOf(link).conn;
}
