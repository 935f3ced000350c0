// In-memory links for fast tests: messages are copied (as a network would) and delivered in a
// later macrotask, so sends and receives interleave as they do over WebRTC; bufferedAmount
// counts undelivered bytes and `drain` fires when it falls to the low-water mark.

import { PendingEvents, type Link, type LinkEvents } from './link.ts';

export class MemoryLink implements Link {
  readonly remoteId: string;
  bufferedAmount = 0;
  closed = false;
  /** Set by vanish(): messages in both directions disappear and nobody is told (a killed tab). */
  private vanished = false;
  private lowWater = 0;
  private readonly events = new PendingEvents();
  private queue: Uint8Array[] = [];
  private scheduled = false;
  other!: MemoryLink;
  /** Tests act at a chosen point of a collective: called with each message before it is delivered here. */
  onReceive: ((data: Uint8Array) => void) | null = null;
  /** Tests lose a message on its way here (a network that dropped it): true drops it, unseen. */
  dropIncoming: ((data: Uint8Array) => boolean) | null = null;

  constructor(remoteId: string) {
    this.remoteId = remoteId;
  }

  setLowWater(bytes: number): void {
    this.lowWater = bytes;
  }

  listen(events: LinkEvents): void {
    this.events.listen(events);
  }

  send(data: Uint8Array): void {
    if (this.closed || this.vanished) return;
    this.queue.push(data.slice());
    this.bufferedAmount += data.byteLength;
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.deliver());
  }

  /** Delivers what is queued now; a close waits behind data, as SCTP flushes before closing. */
  private deliver(): void {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    const wasAbove = this.bufferedAmount > this.lowWater;
    for (const f of queue) {
      this.bufferedAmount -= f.byteLength;
      if (this.vanished || this.other.vanished || this.other.dropIncoming?.(f)) continue;
      this.other.onReceive?.(f);
      this.other.events.frame(f);
    }
    if (wasAbove && this.bufferedAmount <= this.lowWater) this.events.drain();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const other = this.other;
    setImmediate(() => {
      this.deliver();
      other.closed = true;
      if (!this.vanished) other.events.close(`${other.remoteId} closed the connection`);
      this.events.close('closed locally');
    });
  }

  /** Simulates a peer that is killed without a goodbye: nothing arrives any more, no close. */
  vanish(): void {
    this.vanished = true;
    this.other.vanished = true;
  }
}

/** Two connected links: [the end held by a (remote b), the end held by b (remote a)]. */
export function memoryLinkPair(a: string, b: string): [MemoryLink, MemoryLink] {
  const atA = new MemoryLink(b);
  const atB = new MemoryLink(a);
  atA.other = atB;
  atB.other = atA;
  return [atA, atB];
}
