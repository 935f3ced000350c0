// One way of a transport bench stream over a pair of ring links (next: what this peer sends on,
// prev: what it receives on), as a Node volunteer (bench/transport-peer.ts) and a donor page's
// worker (bench/transport-relay-worker.ts) both run it: ring data frames of `msg` bytes, fresh
// each time (links keep what they send), a 32-byte header and a payload copy per frame as the
// ring's sender makes them, the ring's back-pressure marks. No Node or browser API here.
import { DEFAULT_RING_SETTINGS, type Link } from '../src/comm/index.ts';
import { FrameKind, HEADER_BYTES, Phase, writeHeader } from '../src/protocol/frames.ts';

function frame(src: Float32Array, n: number): Uint8Array {
  const f = new Uint8Array(HEADER_BYTES + 4 * src.length);
  writeHeader(f, { kind: FrameKind.data, phase: Phase.reduceScatter, dtype: 'f32', job: 1, generation: 1, step: n, chunk: 0, offset: 0, length: src.length });
  new Float32Array(f.buffer, HEADER_BYTES, src.length).set(src);
  return f;
}

export class LinkStream {
  // A Link takes one listener for its life: these dispatch to whatever the current call needs.
  private onFrame: (f: Uint8Array) => void = () => undefined;
  private onClose: (why: string) => void = () => undefined;
  private wake: (() => void) | null = null;

  constructor(private readonly links: { next: Link; prev: Link }) {
    links.next.setLowWater(DEFAULT_RING_SETTINGS.lowWaterBytes);
    links.next.listen({ frame: () => undefined, drain: () => this.wake?.(), close: () => this.wake?.() });
    links.prev.listen({ frame: (f) => this.onFrame(f), drain: () => undefined, close: (why) => this.onClose(why) });
  }

  /** Resolves once `bytes` arrived; `first` is called at the first frame (start the clocks). */
  recv(bytes: number, first: () => void = () => undefined): Promise<{ bytes: number; ms: number }> {
    return new Promise((resolve, reject) => {
      let got = 0, t0 = 0;
      this.onFrame = (f) => {
        if (got === 0) { t0 = performance.now(); first(); }
        got += f.byteLength;
        if (got >= bytes) {
          this.onFrame = () => undefined;
          resolve({ bytes: got, ms: performance.now() - t0 });
        }
      };
      this.onClose = (why) => reject(new Error(`link closed while receiving: ${why}`));
    });
  }

  async send(bytes: number, msg: number): Promise<{ ms: number }> {
    const { next } = this.links;
    const high = DEFAULT_RING_SETTINGS.highWaterBytes;
    const src = new Float32Array((msg - HEADER_BYTES) >> 2).fill(1);
    const t0 = performance.now();
    for (let sent = 0, n = 0; sent < bytes; sent += msg, n++) {
      while (next.bufferedAmount > high && !next.closed) {
        // drain, or a poll: a paused sender is not always woken by bufferedamountlow alone (RECIPES).
        await new Promise<void>((ok) => { this.wake = ok; setTimeout(ok, 20); });
        this.wake = null;
      }
      if (next.closed) throw new Error('link closed while sending');
      next.send(frame(src, n));
    }
    return { ms: performance.now() - t0 };
  }
}
