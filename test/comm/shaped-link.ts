// A Link with a bandwidth and a latency, over an in-memory pair: a frame occupies the link for
// bytes / bandwidth after the previous one (serialisation), then arrives `latencyMs` later.
// Time is wall time (timers), so transmission goes on while the receiving thread computes, as
// on a network; the frame is handed to the receiver when its event loop is free. bufferedAmount
// counts bytes not yet transmitted, and `drain` fires when it falls to the low-water mark, so
// the ring's back-pressure works as over a data channel.
import type { Link, LinkEvents } from '../../src/comm/link.ts';
import { memoryLinkPair, type MemoryLink } from '../../src/comm/memory-link.ts';
import { Ring, type RingSettings } from '../../src/comm/ring.ts';

export interface LinkShape { bytesPerMs: number; latencyMs: number }

interface Queued { at: number; run: () => void }

/** Runs callbacks at their times, in the order they were queued (times never decrease). */
class Timeline {
  private readonly queue: Queued[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;

  add(at: number, run: () => void): void {
    this.queue.push({ at, run });
    if (!this.timer) this.arm();
  }

  private arm(): void {
    const head = this.queue[0];
    if (!head) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, head.at - performance.now()));
  }

  private fire(): void {
    this.timer = null;
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0]!.at <= now + 0.5) this.queue.shift()!.run();
    this.arm();
  }

  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
  }
}

export class ShapedLink implements Link {
  private pending = 0;
  private lowWater = 0;
  private busyUntil = 0;
  private events: LinkEvents | null = null;
  private readonly transmitted = new Timeline();
  private readonly delivered = new Timeline();
  /** Bytes handed to send(), for the test's figures. */
  sentBytes = 0;

  constructor(private readonly inner: MemoryLink, private readonly shape: LinkShape) {}

  get remoteId(): string { return this.inner.remoteId; }
  get closed(): boolean { return this.inner.closed; }
  get bufferedAmount(): number { return this.pending + this.inner.bufferedAmount; }
  setLowWater(bytes: number): void {
    this.lowWater = bytes;
    this.inner.setLowWater(bytes);
  }

  listen(events: LinkEvents): void {
    this.events = events;
    this.inner.listen(events);
  }

  send(data: Uint8Array): void {
    if (this.inner.closed) return;
    const bytes = data.byteLength;
    const copy = data.slice();
    this.sentBytes += bytes;
    this.pending += bytes;
    const now = performance.now();
    const done = Math.max(now, this.busyUntil) + bytes / this.shape.bytesPerMs;
    this.busyUntil = done;
    this.transmitted.add(done, () => {
      const above = this.pending > this.lowWater;
      this.pending -= bytes;
      if (above && this.pending <= this.lowWater) this.events?.drain();
    });
    this.delivered.add(done + this.shape.latencyMs, () => this.inner.send(copy));
  }

  close(): void {
    this.transmitted.cancel();
    this.delivered.cancel();
    this.inner.close();
  }
}

/** A ring of `ids` over shaped links (each direction of each pair its own link). */
export function shapedRing(ids: readonly string[], shape: LinkShape, settings?: Partial<RingSettings>, generation = 1): { rings: Ring[]; links: ShapedLink[] } {
  const n = ids.length;
  const next: ShapedLink[] = [];
  const prev: ShapedLink[] = new Array<ShapedLink>(n);
  for (let i = 0; i < n; i++) {
    const [a, b] = memoryLinkPair(ids[i]!, ids[(i + 1) % n]!);
    next.push(new ShapedLink(a, shape));
    prev[(i + 1) % n] = new ShapedLink(b, shape);
  }
  const rings = ids.map((selfId, i) => new Ring({ selfId, ids, job: 1, generation, next: next[i], prev: prev[i], settings }));
  return { rings, links: [...next, ...prev] };
}
