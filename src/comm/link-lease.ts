// A ring link that can outlive its ring: one open PeerJS connection (KeptLink) lent to one ring
// at a time (LinkLease). The endpoint's pool (link-pool.ts) holds it between generations.
//
// KeptLink listens to the connection once, for its whole life, and routes what arrives:
//   reuse-handshake frames -> the pool, whoever holds the link (a ring of the old generation
//                             still holding it drops other generations' frames unread: the pool
//                             must see these anyway);
//   every other frame      -> the current lease, or dropped while nobody holds the link;
//   drain, close           -> the current lease; the pool also hears the close.
// A lease that ended (its ring released it) sends nothing and hears nothing more, so a ring of
// an old generation can never write into, or read from, its successor's stream.

import type { LinkKind } from '../protocol/messages.ts';
import { PendingEvents, type Link, type LinkEvents } from './link.ts';
import type { PeerJsLink } from './peerjs-link.ts';
import { hasFrameKind, isReuseKind } from '../protocol/frames.ts';

/** Which end of the ring link this peer holds: 'next' sends data (it dialed), 'prev' receives it. */
export type LinkRole = 'next' | 'prev';

/** What the pool hears from a kept link. */
export interface KeptLinkOwner {
  /** A reuse-handshake frame arrived (whoever holds the link). */
  control(kept: KeptLink, frame: Uint8Array): void;
  /** The ring holding it handed it back, open. */
  released(kept: KeptLink): void;
  /** The connection is gone (either side closed it, or it failed). Called once. */
  closed(kept: KeptLink): void;
}

/** A reuse-handshake frame: magic and kind are enough to route it (the pool parses it whole). */
function isHandshake(f: Uint8Array): boolean {
  return hasFrameKind(f, isReuseKind);
}

export class KeptLink {
  readonly remoteId: string;
  private lease: LinkLease | null = null;
  private listening = false;
  private isClosed = false;

  /** `job`, `tag` and `role`: the ring this connection was formed for (the only ones it may serve). */
  constructor(readonly base: PeerJsLink, readonly job: number, readonly tag: string, readonly role: LinkRole, private readonly owner: KeptLinkOwner) {
    this.remoteId = base.remoteId;
  }

  get closed(): boolean {
    return this.isClosed || this.base.closed;
  }

  /** Whether a lease holds the link now (a ring, or a formation about to hand it to one). */
  get held(): boolean {
    return this.lease !== null;
  }

  /**
   * A new lease for the next holder; the previous one must have ended. Frames arriving from now
   * on wait in the lease until its holder listens.
   */
  lend(): LinkLease {
    if (this.lease) throw new Error(`the link to ${this.remoteId} is lent already: release it first`);
    const lease = new LinkLease(this);
    this.lease = lease;
    // Listen on first use, after the lease exists: messages that arrived before go to it in order.
    this.listen();
    return lease;
  }

  /**
   * Listens to the connection from now on, once for its life (lend does on first use; a link the pool parks, held by nobody,
   * calls it itself): handshake frames go to the pool, others to the lease of the moment, or nowhere.
   */
  listen(): void {
    if (this.listening) return;
    this.listening = true;
    this.base.listen({
      frame: (f) => (isHandshake(f) ? this.owner.control(this, f) : this.lease?.events.frame(f)),
      drain: () => this.lease?.events.drain(),
      close: (reason) => this.gone(reason),
    });
  }

  /** Sends a handshake frame (or anything the pool needs), whoever holds the link. */
  send(frame: Uint8Array): void {
    this.base.send(frame);
  }

  /** Hands the frame to the holder as if the pool had not looked at it (a malformed handshake frame: the ring judges it). */
  deliver(frame: Uint8Array): void {
    this.lease?.events.frame(frame);
  }

  close(): void {
    this.base.close();
    this.gone('closed locally');
  }

  /** Called by `lease` when its holder hands it back. */
  returned(lease: LinkLease): void {
    if (this.lease !== lease) return;
    this.lease = null;
    if (!this.closed) this.owner.released(this);
  }

  private gone(reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.lease?.events.close(reason);
    this.owner.closed(this);
  }
}

/** One holder's use of a kept link: a Link for one ring. */
export class LinkLease implements Link {
  readonly remoteId: string;
  /** Frames and the close for this holder, kept until it listens. */
  readonly events: PendingEvents;
  /** Resolved: a kept link is open when it is lent (formation reads this like a fresh link's). */
  readonly opened: Promise<void> = Promise.resolve();
  private ended = false;

  constructor(private readonly kept: KeptLink) {
    this.remoteId = kept.remoteId;
    this.events = new PendingEvents(() => this.close());
  }

  /** The connection underneath (tests look at it). */
  get base(): PeerJsLink {
    return this.kept.base;
  }

  get bufferedAmount(): number {
    return this.kept.base.bufferedAmount;
  }

  get closed(): boolean {
    return this.ended || this.kept.closed;
  }

  setLowWater(bytes: number): void {
    if (!this.ended) this.kept.base.setLowWater(bytes);
  }

  send(data: Uint8Array): void {
    if (!this.ended) this.kept.base.send(data);
  }

  listen(events: LinkEvents): void {
    this.events.listen(events);
  }

  /** Closes the connection (the remote notices at once). */
  close(): void {
    if (this.ended) return;
    this.ended = true;
    this.kept.close();
  }

  release(): void {
    if (this.ended) return;
    this.ended = true;
    this.kept.returned(this);
  }

  route(relayHosts: readonly string[] = []): Promise<LinkKind | null> {
    return this.kept.base.route(relayHosts);
  }
}
