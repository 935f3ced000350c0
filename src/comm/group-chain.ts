// One phase (reduce-scatter or all-gather) of a group's ring when the gradient is cut into
// K shards owned by ranks 0..K-1 of a ring of n >= K (ranks K.. own nothing and only pass on).
//
// Reduce-scatter, ring step k = 0 .. n-2: rank r sends shard r-1-k and receives shard r-2-k
// (mod n; a shard >= K does not exist: nothing moves). Shard j thus starts at rank j+1 and is
// summed along the ring in rank order j+1, j+2, ..., j+n-1, and finally j itself:
//   sum_j = ((x[j+1] + x[j+2]) + ...) + x[j]      (float32, each + once, by one peer)
// All-gather, ring step k: rank r sends shard r-k and receives shard r-1-k, copying it; shard j
// goes from its owner once round the ring. The send of (k, segment s) waits for the receive of
// (k-1, segment s): the same shard, so segments pipeline as in allreduce.ts.

import { RingError } from './errors.ts';
import { decodePayload, inspectPayload } from '../protocol/codec.ts';
import { chunkRange, segmentCount } from './plan.ts';
import type { CollectiveSink, Ring } from './ring.ts';
import { ReceiveWaits } from './receive-waits.ts';
import { FrameKind, HEADER_BYTES, Phase, dataFrame, type FrameHeader, type WireFormat } from '../protocol/frames.ts';

export interface ChainStep {
  /** Shard sent at this ring step, or null. */
  send: number | null;
  /** Shard received at this ring step, or null. */
  recv: number | null;
}

const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** The ring steps of rank `rank` in a group ring of n with `shards` owners (pure). */
export function chainSteps(phase: Phase, rank: number, n: number, shards: number): ChainStep[] {
  const own = (j: number): number | null => (j < shards ? j : null);
  const steps: ChainStep[] = [];
  const base = phase === Phase.reduceScatter ? rank - 1 : rank;
  for (let k = 0; k < n - 1; k++) steps.push({ send: own(mod(base - k, n)), recv: own(mod(base - 1 - k, n)) });
  return steps;
}

/** [start, end) of shard j when `length` elements are cut into `shards` shards. */
export const shardRange = (j: number, length: number, shards: number): [number, number] => chunkRange(j, length, shards);

export interface ChainInit {
  grad: Float32Array;
  ring: Ring;
  /** The ring-level step (frames carry it; strictly increasing per ring). */
  ringStep: number;
  phase: Phase;
  shards: number;
  wire: WireFormat;
  segElems: number;
  maxRms: number;
  /** Error feedback, as long as grad (AllReduceOptions.feedback); null: none. */
  feedback: Float32Array | null;
  /** Called when the first data frame arrives (the time before it is spent waiting). */
  onFirstFrame?: () => void;
}

/**
 * Runs one phase over `ring` and resolves when everything was sent and received. Rejects with
 * the ring's RingError on failure (the ring is then dead: see ring.ts).
 */
export async function runChain(init: ChainInit): Promise<void> {
  const c = new ChainCollective(init);
  init.ring.begin(c);
  try {
    await Promise.all([c.sendAll(), c.received]);
  } finally {
    init.ring.end(c);
  }
}

class ChainCollective extends ReceiveWaits implements CollectiveSink {
  readonly step: number;
  private readonly steps: ChainStep[];
  private readonly got: Int32Array;
  private recvT = 0;
  private recvJ = 0;
  private firstFrame: (() => void) | undefined;

  constructor(private readonly o: ChainInit) {
    super();
    this.step = o.ringStep;
    this.firstFrame = o.onFirstFrame;
    this.steps = o.ring.size > 1 ? chainSteps(o.phase, o.ring.rank, o.ring.size, o.shards) : [];
    this.got = new Int32Array(this.steps.length);
    this.skipEmpty();
  }

  private range(j: number): [number, number] {
    return shardRange(j, this.o.grad.length, this.o.shards);
  }

  private segs(j: number | null): number {
    if (j === null) return 0;
    const [a, b] = this.range(j);
    return segmentCount(b - a, this.o.segElems);
  }

  /** [offset, length] of segment s of shard j. */
  private segment(j: number, s: number): [number, number] {
    const [a, b] = this.range(j);
    const off = a + s * this.o.segElems;
    return [off, Math.min(this.o.segElems, b - off)];
  }

  private skipEmpty(): void {
    while (this.recvT < this.steps.length && this.recvJ >= this.segs(this.steps[this.recvT].recv)) {
      this.recvT++;
      this.recvJ = 0;
    }
    if (this.recvT === this.steps.length) this.resolveReceived();
  }

  data(h: FrameHeader, frame: Uint8Array): void {
    const { ring, wire, phase, grad } = this.o;
    const first = this.firstFrame;
    this.firstFrame = undefined;
    first?.();
    const from = ring.prev?.remoteId ?? ring.selfId;
    const refuse = (why: string) => new RingError('bad-frame', from, `group ring step ${this.step}: ${why}`, ring.selfId);
    if (this.recvT === this.steps.length) throw refuse('frame after the phase was complete');
    const j = this.steps[this.recvT].recv;
    if (j === null) throw refuse('internal: receive cursor on an empty step');
    const [off, len] = this.segment(j, this.recvJ);
    if (h.kind !== FrameKind.data || h.phase !== phase || h.chunk !== j || h.offset !== off || h.length !== len || h.dtype !== wire) {
      throw refuse(`expected ${wire} phase ${phase} shard ${j} offset ${off} length ${len}, `
        + `got ${h.dtype} phase ${h.phase} chunk ${h.chunk} offset ${h.offset} length ${h.length}; ${this.whereAmI(h)}`);
    }
    const body = frame.subarray(HEADER_BYTES);
    const { bad, rms } = inspectPayload(body, wire, len, Number.isFinite(this.o.maxRms));
    if (bad >= 0) throw refuse(`non-finite value at element ${off + bad} (shard ${j})`);
    if (rms > this.o.maxRms) {
      throw refuse(`values far too large: RMS ${rms.toExponential(2)} over the bound ${this.o.maxRms.toExponential(2)} (shard ${j}, offset ${off})`);
    }
    decodePayload(body, grad.subarray(off, off + len), wire, phase === Phase.allGather ? 'set' : 'add');
    this.got[this.recvT]++;
    this.recvJ++;
    ring.progress();
    this.skipEmpty();
    this.wake();
  }

  /**
   * Where this receiver stood and where the frame that came belongs in its schedule (a missed
   * frame shows as one from a later segment; a sender with another plan as none): for the
   * blame's reason, which is all there is to go on when an honest peer is blamed.
   */
  private whereAmI(h: FrameHeader): string {
    const { ring, shards, segElems } = this.o;
    let total = 0;
    for (const n of this.got) total += n;
    let belongs = "no frame of this peer's schedule";
    for (let t = 0; t < this.steps.length; t++) {
      const r = this.steps[t].recv;
      if (r !== h.chunk) continue;
      for (let s = 0; s < this.segs(r); s++) {
        const [o, l] = this.segment(r, s);
        if (o === h.offset && l === h.length) belongs = `segment ${s} of chain step ${t}`;
      }
    }
    return `this receiver was at chain step ${this.recvT} of ${this.steps.length}, segment ${this.recvJ} `
      + `(${this.got[this.recvT] ?? 0} frames in at this step, ${total} in this phase), rank ${ring.rank} of ${ring.size}, `
      + `${shards} shards, ${segElems} elements per frame; the frame is ${belongs}`;
  }

  async sendAll(): Promise<void> {
    const { ring, grad, wire, phase } = this.o;
    const link = ring.next;
    if (!link) return;
    const high = ring.settings.highWaterBytes;
    for (let t = 0; t < this.steps.length; t++) {
      const j = this.steps[t].send;
      if (j === null) continue;
      const nseg = this.segs(j);
      for (let s = 0; s < nseg; s++) {
        while (t > 0 && this.got[t - 1] <= s) await this.next();
        while (link.bufferedAmount > high) await this.next();
        if (this.error) throw this.error;
        const [off, len] = this.segment(j, s);
        // The owner's value (its first all-gather send) goes out rounded on a lossy wire: it keeps the rounded values.
        const fb = this.o.feedback?.subarray(off, off + len);
        const at = { phase, dtype: wire, step: this.step, chunk: j, offset: off };
        ring.sendNext(dataFrame(ring, at, grad.subarray(off, off + len), phase === Phase.allGather && t === 0, fb));
      }
    }
    if (this.error) throw this.error;
  }
}
