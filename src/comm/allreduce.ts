// Ring all-reduce (sum) of one flat Float32Array: N-1 reduce-scatter steps, then N-1
// all-gather steps, pipelined per message: the send of (ring step t, segment j) starts as
// soon as (t-1, j) has arrived, so sends and receives overlap and every link is busy at once.
// Each chunk's sum is formed once, by its owner, and then copied: all peers end bitwise equal.

import { RingError } from './errors.ts';
import { decodeHalfAdd, decodeHalfSet, encodeHalf } from './half.ts';
import { chunkRange, ringSteps, segmentCount, segmentRange, sentBytes, type RingStep } from './plan.ts';
import type { CollectiveSink, Ring } from './ring.ts';
import { BYTES_PER_ELEMENT, FrameKind, HEADER_BYTES, MAX_FRAME_BYTES, Phase, writeHeader, type FrameHeader, type WireFormat } from './wire.ts';

/** 64 KiB frames: see bench/allreduce.ts and README numbers (fewer per-message costs, still pipelined). */
export const DEFAULT_MESSAGE_BYTES = 64 << 10;

export interface AllReduceOptions {
  ring: Ring;
  /** The training step; frames of other steps are refused. Strictly increasing per ring. */
  step: number;
  /** 'f16' / 'bf16' halve the bytes on the wire (float32 accumulation). Default 'f32'. */
  wire?: WireFormat;
  /** Frame size including the 32-byte header, at most 256 KiB. Default 64 KiB. */
  messageBytes?: number;
  /** Keep a copy of the input and restore it if the collective fails (costs one copy). */
  keepInput?: boolean;
  /** Called when the first data frame arrives: the time before it is spent waiting for prev. */
  onFirstFrame?: () => void;
  /**
   * A bound on what a peer may send: the RMS of a received segment must stay within
   * `maxRms` (the caller's running statistic of a whole batch's gradient RMS, times a generous
   * factor). A segment over it is refused before it is added in, blaming its sender.
   */
  maxRms?: number;
}

/**
 * Sums `grad` over every peer of `ring`, in place, and resolves to `grad`. On failure rejects
 * with a RingError naming the peer to blame; `grad` is then partly reduced (restored when
 * `keepInput`), and the ring is dead: form a new ring and redo the step.
 */
export async function allReduceSum(grad: Float32Array, opts: AllReduceOptions): Promise<Float32Array> {
  const { ring, step } = opts;
  const wire = opts.wire ?? 'f32';
  const messageBytes = opts.messageBytes ?? DEFAULT_MESSAGE_BYTES;
  const bpe = BYTES_PER_ELEMENT[wire];
  if (!(grad instanceof Float32Array)) throw new RingError('bad-input', ring.selfId, 'the gradient must be one Float32Array');
  if (!Number.isInteger(messageBytes) || messageBytes < HEADER_BYTES + bpe || messageBytes > MAX_FRAME_BYTES) {
    throw new RingError('bad-input', ring.selfId, `messageBytes ${messageBytes} must be an integer in [${HEADER_BYTES + bpe}, ${MAX_FRAME_BYTES}]`);
  }
  if (grad.length > 0xffffffff) throw new RingError('bad-input', ring.selfId, 'more than 2^32 elements');
  const backup = opts.keepInput ? grad.slice() : null;
  const c = new Collective(grad, ring, step, wire, Math.floor((messageBytes - HEADER_BYTES) / bpe), opts.onFirstFrame, opts.maxRms);
  ring.begin(c);
  try {
    if (ring.size > 1) await Promise.all([c.sendAll(), c.received]);
    return grad;
  } catch (e) {
    if (backup) grad.set(backup);
    throw e;
  } finally {
    ring.end(c);
  }
}

class Collective implements CollectiveSink {
  readonly step: number;
  readonly received: Promise<void>;
  private readonly steps: RingStep[];
  /** Segments received (and applied) per ring step. */
  private readonly got: Int32Array;
  private recvT = 0;
  private recvJ = 0;
  private error: RingError | null = null;
  private waiter: (() => void) | null = null;
  private resolveReceived!: () => void;
  private rejectReceived!: (e: RingError) => void;
  private scratch: Uint8Array = new Uint8Array(0);

  constructor(
    private readonly grad: Float32Array,
    private readonly ring: Ring,
    step: number,
    private readonly wire: WireFormat,
    private readonly segElems: number,
    private onFirstFrame?: () => void,
    private readonly maxRms = Number.POSITIVE_INFINITY,
  ) {
    this.step = step;
    this.steps = ringSteps(ring.rank, ring.size);
    this.got = new Int32Array(this.steps.length);
    this.received = new Promise<void>((res, rej) => {
      this.resolveReceived = res;
      this.rejectReceived = rej;
    });
    // Promise.all subscribes later; do not let an early failure count as unhandled.
    this.received.catch(() => undefined);
    this.skipEmpty();
  }

  private segs(chunk: number): number {
    const [a, b] = chunkRange(chunk, this.grad.length, this.ring.size);
    return segmentCount(b - a, this.segElems);
  }

  /** Moves the receive cursor past ring steps with nothing left to receive. */
  private skipEmpty(): void {
    while (this.recvT < this.steps.length && this.recvJ >= this.segs(this.steps[this.recvT].recvChunk)) {
      this.recvT++;
      this.recvJ = 0;
    }
    if (this.recvT === this.steps.length) this.resolveReceived();
  }

  data(h: FrameHeader, frame: Uint8Array): void {
    if (this.onFirstFrame) {
      this.onFirstFrame();
      this.onFirstFrame = undefined;
    }
    const from = this.ring.prev?.remoteId ?? this.ring.selfId;
    const refuse = (why: string) => new RingError('bad-frame', from, `step ${this.step}: ${why}`, this.ring.selfId);
    if (this.recvT === this.steps.length) throw refuse('frame after the collective was complete');
    const st = this.steps[this.recvT];
    const [off, len] = segmentRange(st.recvChunk, this.recvJ, this.grad.length, this.ring.size, this.segElems);
    if (h.kind !== FrameKind.data || h.phase !== st.phase || h.chunk !== st.recvChunk || h.offset !== off || h.length !== len || h.dtype !== this.wire) {
      throw refuse(`expected ${this.wire} phase ${st.phase} chunk ${st.recvChunk} offset ${off} length ${len}, got ${h.dtype} phase ${h.phase} chunk ${h.chunk} offset ${h.offset} length ${h.length}`);
    }
    // A gradient is checked before it is added in: one NaN or Inf from a broken or hostile peer
    // would spread to every weight of every peer. The sender (prev) is blamed.
    const { bad, rms } = this.inspect(frame, len);
    if (bad >= 0) throw refuse(`non-finite value at element ${off + bad} (phase ${st.phase}, chunk ${st.recvChunk})`);
    if (rms > this.maxRms) throw refuse(`values far too large: RMS ${rms.toExponential(2)} over the bound ${this.maxRms.toExponential(2)} (phase ${st.phase}, chunk ${st.recvChunk}, offset ${off})`);
    this.apply(st.phase, frame, off, len);
    this.got[this.recvT]++;
    this.recvJ++;
    this.ring.progress();
    this.skipEmpty();
    this.wake();
  }

  /** Adds (reduce-scatter) or copies (all-gather) the payload into grad[off, off+len). */
  private apply(phase: Phase, frame: Uint8Array, off: number, len: number): void {
    const dst = this.grad.subarray(off, off + len);
    if (this.wire === 'f32') {
      const src = this.payload(frame, 4, len) as Float32Array;
      if (phase === Phase.allGather) dst.set(src);
      else for (let i = 0; i < len; i++) dst[i] += src[i];
    } else {
      const src = this.payload(frame, 2, len) as Uint16Array;
      if (phase === Phase.allGather) decodeHalfSet(src, dst, this.wire);
      else decodeHalfAdd(src, dst, this.wire);
    }
  }

  /** The first NaN or infinity in the frame's payload (-1: none) and the payload's RMS. */
  private inspect(frame: Uint8Array, len: number): { bad: number; rms: number } {
    if (this.wire === 'f32') {
      const src = this.payload(frame, 4, len) as Float32Array;
      // x * 0 is 0 for every finite x and NaN otherwise: one pass, no branch per element.
      let acc = 0;
      let sq = 0;
      for (let i = 0; i < len; i++) {
        const v = src[i]!;
        acc += v * 0;
        sq += v * v;
      }
      return { bad: acc === 0 ? -1 : src.findIndex((v) => !Number.isFinite(v)), rms: Math.sqrt(sq / Math.max(1, len)) };
    }
    const src = this.payload(frame, 2, len) as Uint16Array;
    const mask = this.wire === 'f16' ? 0x7c00 : 0x7f80; // all-ones exponent: Inf or NaN
    const bad = src.findIndex((v) => (v & mask) === mask);
    if (bad >= 0 || !Number.isFinite(this.maxRms)) return { bad, rms: 0 };
    const f = new Float32Array(len);
    decodeHalfSet(src, f, this.wire);
    let sq = 0;
    for (let i = 0; i < len; i++) sq += f[i]! * f[i]!;
    return { bad, rms: Math.sqrt(sq / Math.max(1, len)) };
  }

  /** A typed view of the payload: in place when aligned, else one copy into a scratch buffer. */
  private payload(frame: Uint8Array, bpe: 2 | 4, len: number): Float32Array | Uint16Array {
    const at = frame.byteOffset + HEADER_BYTES;
    let buf = frame.buffer;
    let start = at;
    if (at % bpe !== 0) {
      if (this.scratch.byteLength < len * bpe) this.scratch = new Uint8Array(len * bpe);
      this.scratch.set(frame.subarray(HEADER_BYTES, HEADER_BYTES + len * bpe));
      buf = this.scratch.buffer;
      start = 0;
    }
    return bpe === 4 ? new Float32Array(buf, start, len) : new Uint16Array(buf, start, len);
  }

  wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  fail(err: RingError): void {
    if (this.error) return;
    this.error = err;
    this.rejectReceived(err);
    this.wake();
  }

  /** Resolves at the next wake (a frame applied, a drain, a failure); throws once failed. */
  private async next(): Promise<void> {
    if (this.error) throw this.error;
    await new Promise<void>((res) => { this.waiter = res; });
    if (this.error) throw this.error;
  }

  async sendAll(): Promise<void> {
    const { ring, grad, wire, segElems } = this;
    const link = ring.next;
    if (!link) return;
    const high = ring.settings.highWaterBytes;
    const n = ring.size;
    for (let t = 0; t < this.steps.length; t++) {
      const st = this.steps[t];
      const nseg = this.segs(st.sendChunk);
      for (let j = 0; j < nseg; j++) {
        while (t > 0 && this.got[t - 1] <= j) await this.next();
        while (link.bufferedAmount > high) await this.next();
        if (this.error) throw this.error;
        const [off, len] = segmentRange(st.sendChunk, j, grad.length, n, segElems);
        const frame = new Uint8Array(HEADER_BYTES + len * BYTES_PER_ELEMENT[wire]);
        writeHeader(frame, { kind: FrameKind.data, phase: st.phase, dtype: wire, job: ring.job, generation: ring.generation, step: this.step, chunk: st.sendChunk, offset: off, length: len });
        const src = grad.subarray(off, off + len);
        if (wire === 'f32') {
          new Float32Array(frame.buffer, HEADER_BYTES, len).set(src);
        } else {
          const half = new Uint16Array(frame.buffer, HEADER_BYTES, len);
          encodeHalf(src, half, wire);
          // The owner's sum goes out rounded: keep the same rounded values so all peers agree bitwise.
          if (t === n - 1) decodeHalfSet(half, src, wire);
        }
        ring.sendNext(frame);
      }
    }
  }
}

/** Bytes this peer sends in allReduceSum of `length` floats with the default frames (f32 wire unless given). */
export function allReduceSentBytes(rank: number, length: number, ringSize: number, wire: WireFormat = 'f32', messageBytes = DEFAULT_MESSAGE_BYTES): number {
  const bpe = BYTES_PER_ELEMENT[wire];
  return sentBytes(rank, length, ringSize, Math.floor((messageBytes - HEADER_BYTES) / bpe), bpe, HEADER_BYTES);
}
