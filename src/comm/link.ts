// A Link is one side of an ordered, reliable, message-oriented connection to one other peer
// (an RTCDataChannel, or an in-memory pair in tests). The ring only needs this much.

import type { LinkKind } from '../protocol/messages.ts';
export interface LinkEvents {
  /** One whole message, as sent. The view may be kept: links never reuse its memory. */
  frame(data: Uint8Array): void;
  /** bufferedAmount fell to the low-water mark (the `bufferedamountlow` event). */
  drain(): void;
  /** The connection is gone (remote closed, transport error). Fires at most once. */
  close(reason: string): void;
}

export interface Link {
  /** The peer at the other end. */
  readonly remoteId: string;
  /** Bytes handed to send() and not yet on the network. */
  readonly bufferedAmount: number;
  readonly closed: boolean;
  /** `drain` fires when bufferedAmount falls to `bytes` or below. */
  setLowWater(bytes: number): void;
  /** Queues one message; the link keeps `data`, so the caller must not reuse it. No-op once closed. */
  send(data: Uint8Array): void;
  /** Sets the one listener. Messages that arrived earlier are delivered now, in order. */
  listen(events: LinkEvents): void;
  close(): void;
  /**
   * Hands the connection back to whoever lent it, open, for a later ring (PeerEndpoint's pool,
   * link-lease.ts); this holder then sends and hears nothing more on it. Links that cannot be
   * kept have none, and Ring closes them instead.
   */
  release?(): void;
  /** Direct or through a TURN relay (WebRTC links); null or absent when it cannot tell. */
  route?(relayHosts?: readonly string[]): Promise<LinkKind | null>;
}

/** Turns whatever a transport delivered into a byte view without copying. */
export function asBytes(data: unknown): Uint8Array {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  // A string or Blob is not a ring frame: an empty view makes the ring report a truncated frame.
  return new Uint8Array(0);
}

/**
 * Bytes a connection may deliver before a ring takes it. A neighbour that started the step
 * sooner sends at most about one gradient's share ahead (the Ring allows 256 MiB the same way);
 * a stranger's connection that just pours data in is cut off here.
 */
export const MAX_EARLY_BYTES = 256 << 20;

/** Holds messages and a close that arrive before the listener is set (connections open early). */
export class PendingEvents {
  private events: LinkEvents | null = null;
  private early: Uint8Array[] = [];
  private earlyBytes = 0;
  /** Called once when more than `maxEarly` bytes arrived before listen() (the owner closes the link). */
  constructor(private readonly onOverflow: () => void = () => undefined, private readonly maxEarly = MAX_EARLY_BYTES) {}
  private earlyClose: string | null = null;
  private closedOnce = false;

  listen(events: LinkEvents): void {
    if (this.events) throw new Error('a Link has exactly one listener');
    this.events = events;
    const early = this.early;
    this.early = [];
    for (const f of early) events.frame(f);
    if (this.earlyClose !== null) events.close(this.earlyClose);
  }

  frame(data: Uint8Array): void {
    if (this.events) return this.events.frame(data);
    if (this.closedOnce) return;
    this.earlyBytes += data.byteLength;
    if (this.earlyBytes > this.maxEarly) {
      this.early = [];
      this.close(`more than ${this.maxEarly} bytes arrived before the ring took this connection`);
      this.onOverflow();
      return;
    }
    this.early.push(data);
  }

  drain(): void {
    this.events?.drain();
  }

  close(reason: string): void {
    if (this.closedOnce) return;
    this.closedOnce = true;
    if (this.events) this.events.close(reason);
    else this.earlyClose = reason;
  }
}
