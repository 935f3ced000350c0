// A Link over a PeerJS DataConnection opened with serialization 'raw' and reliable: true, so
// each send() is one ordered RTCDataChannel message with no PeerJS framing. Back-pressure uses
// the channel's own bufferedAmount and `bufferedamountlow`; we stay far below PeerJS's 8 MiB
// internal queue, which would otherwise poll every 50 ms.
//
// A new connection's dialing end sends nothing before it has heard from the accepting end, which
// sends a READY frame as soon as its side is open (src/protocol/frames.ts); what the ring sends meanwhile waits
// here, in order, and counts in bufferedAmount. Why: node-datachannel (0.33, libdatachannel
// 0.24) delivers a channel's messages out of order when some arrived before JavaScript took the
// channel: setting the message callback flushes them on the JavaScript thread while the SCTP
// thread flushes newer ones, both popping one queue. The accepting end takes the channel only
// when its event loop is free, and a volunteer's is busy computing while its ring forms, so the
// first frames of a fresh link came out of order now and then (a receiver refused "frame out of
// sequence" in a generation's first step and evicted an honest sender; without this wait, frames
// came late in 2-5 of 12 new connections in test/comm/ndc-order.test.ts). Anything the accepting
// end sends was sent after it took the channel, so once it is heard every later frame arrives in
// order. The dialing end's own channel is made by JavaScript before any message can come, so the
// other direction is safe.
//
// The dialing end answers the first frame it hears with a READY of its own, and the accepting end
// counts the link open (`opened`) only once it has heard that. Why: formation may close a dial
// whose channel is late and dial again (the hedge, link-formation.ts), and a ring only ever reads
// the links formation handed it. Without the answer the accepting end took a link as soon as its
// own side opened, while the dialing end, whose side had not opened yet, could still close it: the
// accepting end's ring then failed "the data connection closed" in its first step and blamed an
// honest dialer (CI, 2026-11-28: each joiner of a 3-ring in turn, until the test gave up). The
// dialing end answers only once its side is open, and formation never closes an open dial, so a
// link the accepting end took is one the dialing end keeps.

import type { LinkKind } from '../protocol/messages.ts';
import { PendingEvents, asBytes, type Link, type LinkEvents } from './link.ts';
import { routeOf } from './route.ts';
import { isReadyFrame, readyFrame } from '../protocol/frames.ts';
import { LinkMachine } from './link-machine.ts';

/** The parts of RTCDataChannel we use (browsers and node-datachannel's polyfill both have them). */
export interface DataChannelLike {
  readonly bufferedAmount: number;
  bufferedAmountLowThreshold: number;
  addEventListener(type: 'bufferedamountlow', cb: () => void): void;
}

/** The parts of RTCPeerConnection we watch (browsers and node-datachannel's polyfill). */
export interface PeerConnectionLike {
  readonly connectionState: string;
  /** ICE alone ('connected' or 'completed' before DTLS and the channel); absent in some fakes. */
  readonly iceConnectionState?: string;
  addEventListener(type: 'connectionstatechange' | 'iceconnectionstatechange', cb: () => void): void;
  /** The route of the selected candidate pair (a worker's relayed connection asks the page). */
  route?(relayHosts: readonly string[]): Promise<LinkKind | null>;
}

/** The parts of a PeerJS DataConnection we use. */
export interface DataConnectionLike {
  readonly peer: string;
  readonly open: boolean;
  readonly metadata: unknown;
  readonly dataChannel: DataChannelLike | undefined;
  /** Set by PeerJS when the connection is made (before connect() returns or 'connection' fires). */
  readonly peerConnection: PeerConnectionLike | null | undefined;
  send(data: Uint8Array): void;
  close(): void;
  on(event: 'data', cb: (data: unknown) => void): unknown;
  on(event: 'open' | 'close', cb: () => void): unknown;
  on(event: 'error', cb: (err: Error) => void): unknown;
}

/** Which end of the connection this link is: the one that dialed it, or the one that accepted it. */
export type LinkEnd = 'dialed' | 'accepted';

export class PeerJsLink implements Link {
  readonly remoteId: string;
  /** Where this link is (link-machine.ts): it moves itself to Open and Closed, the pool through its kept phases. */
  readonly machine: LinkMachine;
  // A connection nobody has taken yet that pours data in is closed (bounded memory).
  private readonly events = new PendingEvents(() => this.close());
  private isClosed = false;
  private lowWater = 0;
  /** The dialing end's sends until the other end is heard (null: heard, or the accepting end). */
  private held: Uint8Array[] | null;
  private heldBytes = 0;
  /** The other end was heard before this end's channel said open: the answer waits for the open event. */
  private answering = false;
  /**
   * Resolves when the channel opens (on the accepting end: and the dialing end has answered its READY); rejects (with the reason) if
   * the link goes before that.
   */
  readonly opened: Promise<void>;
  /** The accepting end heard the dialing end (null: heard, or the dialing end). */
  private answered: (() => void) | null = null;
  /** Resolves when ICE is up (link-formation.ts hedges a channel late after that); absent without a peer connection. */
  readonly iceConnected?: Promise<void>;
  private failOpen: (reason: string) => void = () => undefined;

  /** `end`: whether this side dialed the connection (it then waits to hear the other end before sending) or accepted it (it says READY once open). */
  constructor(readonly conn: DataConnectionLike, readonly end: LinkEnd) {
    this.remoteId = conn.peer;
    this.machine = new LinkMachine(conn.peer, end === 'dialed' ? 'Dialing' : 'Accepting');
    this.held = end === 'dialed' ? [] : null;
    const answered = end === 'dialed' ? Promise.resolve() : new Promise<void>((resolve) => { this.answered = resolve; });
    this.opened = new Promise<void>((resolve, reject) => {
      this.failOpen = (reason) => reject(new Error(reason));
      if (conn.open) resolve();
      else conn.on('open', () => resolve());
    }).then(() => {
      this.armDrain();
      if (end === 'accepted' && !this.isClosed) {
        this.conn.send(readyFrame());
        this.machine.go('Answered');
      }
      return Promise.race([answered, this.closedBeforeOpen()]);
    }).then(() => this.machine.go('Open'));
    // Whoever forms the ring subscribes later (or never, for a refused link): not unhandled.
    this.opened.catch(() => undefined);
    // Listen at once: the other side may send before the ring takes this link.
    conn.on('data', (d) => this.received(asBytes(d)));
    conn.on('close', () => this.gone('the data connection closed'));
    conn.on('error', (e) => this.gone(`data connection error: ${e.message}`));
    // PeerJS closes a DataConnection only on ICE 'failed'/'closed'. A DTLS handshake that fails
    // (see offerAsDtlsClient in node.ts) leaves ICE 'connected' and the PeerConnection
    // 'failed': without this the link would neither open nor close, and formation would wait
    // for its timeout instead of re-dialing at once.
    const pc = conn.peerConnection;
    if (!pc) return;
    pc.addEventListener('connectionstatechange', () => {
      const state = pc.connectionState;
      if (state !== 'failed' && state !== 'closed') return;
      this.gone(`the peer connection is ${state}`);
      this.conn.close();
    });
    // ICE up with the channel still shut: formation hedges such a dial (link-formation.ts).
    const up = () => pc.iceConnectionState === 'connected' || pc.iceConnectionState === 'completed';
    this.iceConnected = new Promise<void>((resolve) => {
      if (up()) return resolve();
      pc.addEventListener('iceconnectionstatechange', () => { if (up()) resolve(); });
    });
  }

  /** Its connection's states (formation's timeout message): ICE, the peer connection, the channel, and whether the other end was heard. */
  describe(): string {
    const pc = this.conn.peerConnection;
    const states = pc ? `ICE ${pc.iceConnectionState ?? '?'}, connection ${pc.connectionState}` : 'no peer connection yet';
    return `${states}, channel ${this.conn.open ? 'open' : 'shut'}${this.end === 'dialed' ? `, ${this.held ? 'not heard' : 'heard'}` : ''}`;
  }

  /** Rejects once the link goes (the accepting end's wait for the dialing end's answer ends with it). */
  private closedBeforeOpen(): Promise<never> {
    return new Promise<never>((_, reject) => {
      const prev = this.failOpen;
      if (this.isClosed) return reject(new Error('closed before the other end answered'));
      this.failOpen = (reason) => { prev(reason); reject(new Error(reason)); };
    });
  }

  /**
   * A message from the other end: on the dialing end, it can hear us (answer READY, then send what waited); on the accepting end,
   * the dialing end answered (the link is open). READY itself goes no further.
   */
  private received(frame: Uint8Array): void {
    if (this.held) this.hear();
    if (this.answered) {
      this.answered();
      this.answered = null;
    }
    if (isReadyFrame(frame)) return;
    this.events.frame(frame);
  }

  /**
   * The dialing end heard the other end: answer READY and send what waited, once this end's channel says open. A stack
   * that delivers a message before its own open event (not seen; libdatachannel and Chromium keep them in order) would
   * otherwise make the answer and the held frames vanish, and the accepting end would wait for the answer until formation's
   * timeout.
   */
  private hear(): void {
    if (this.answering) return;
    if (this.conn.open) return this.heard(this.held ?? []);
    this.answering = true;
    this.conn.on('open', () => {
      this.answering = false;
      if (this.held) this.heard(this.held);
    });
  }

  private heard(held: Uint8Array[]): void {
    this.held = null;
    this.heldBytes = 0;
    if (this.isClosed || !this.conn.open) return;
    this.conn.send(readyFrame());
    for (const f of held) this.conn.send(f);
    // A sender held back by bufferedAmount looks again (the bytes are now the channel's).
    if (held.length > 0) this.events.drain();
  }

  private armDrain(): void {
    const dc = this.conn.dataChannel;
    if (!dc) return;
    dc.bufferedAmountLowThreshold = this.lowWater;
    dc.addEventListener('bufferedamountlow', () => this.events.drain());
  }

  private gone(reason: string): void {
    this.isClosed = true;
    this.machine.go('Closed');
    this.failOpen(reason);
    this.events.close(reason);
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** The channel's buffered bytes, and on a dialed link those waiting for the other end to be heard. */
  get bufferedAmount(): number {
    return (this.conn.dataChannel?.bufferedAmount ?? 0) + this.heldBytes;
  }

  /** Whether the other end has been heard (always, on the accepting end). */
  get hearing(): boolean {
    return this.held === null;
  }

  setLowWater(bytes: number): void {
    this.lowWater = bytes;
    const dc = this.conn.dataChannel;
    if (dc) dc.bufferedAmountLowThreshold = bytes;
  }

  send(data: Uint8Array): void {
    if (this.isClosed || !this.conn.open) return;
    if (this.held) {
      this.held.push(data);
      this.heldBytes += data.byteLength;
      return;
    }
    this.conn.send(data);
  }

  listen(events: LinkEvents): void {
    this.events.listen(events);
  }

  route(relayHosts: readonly string[] = []): Promise<LinkKind | null> {
    const pc = this.conn.peerConnection;
    if (!pc || this.isClosed) return Promise.resolve(null);
    return pc.route ? pc.route(relayHosts) : routeOf(pc, relayHosts);
  }

  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.machine.go('Closed');
    if (this.held) this.held = [];
    this.heldBytes = 0;
    this.failOpen('closed locally');
    this.conn.close();
  }
}
