// Ring all-reduce (sum) of one flat Float32Array: N-1 reduce-scatter steps, then N-1
// all-gather steps, pipelined per message: the send of (ring step t, segment j) starts as
// soon as (t-1, j) has arrived, so sends and receives overlap and every link is busy at once.
// Each chunk's sum is formed once, by its owner, and then copied: all peers end bitwise equal.
//
// On each link the sender first sends a PLAN frame (ring size, its rank, gradient length,
// elements per frame); the receiver checks it against its own before reading any data, so
// peers that were given different gradients or ring orders fail with an error that says so.
// Then both ends walk the same frame sequence, linkSchedule(receiver's rank): the sender with
// its rank + 1, the receiver with its own, so they cannot disagree about which chunk comes
// next, how many frames it takes, or that an empty chunk takes none.

import { RingError } from './errors.ts';
import { decodePayload, elementsPerFrame, inspectPayload, minFrameBytes, PAYLOAD_EXTRA } from '../protocol/codec.ts';
import { ringChunkRange, ringSteps, segmentCount, sentBytes } from './plan.ts';
import type { HopNotes, HopView, RelayTamper } from './hop-record.ts';
import type { CollectiveSink, Ring } from './ring.ts';
import { ReceiveWaits } from './receive-waits.ts';
import {
  BYTES_PER_ELEMENT, FrameKind, HEADER_BYTES, MAX_FRAME_BYTES, PLAN_FRAME_BYTES, Phase, dataFrame, parsePlan, planFrame,
  type CollectivePlan, type FrameHeader, type WireFormat,
} from '../protocol/frames.ts';

/** 64 KiB frames: see bench/allreduce.ts and docs/transport.md (fewer per-message costs, still pipelined). */
export const DEFAULT_MESSAGE_BYTES = 64 << 10;

export interface AllReduceOptions {
  ring: Ring;
  /** The training step; frames of other steps are refused. Strictly increasing per ring. */
  step: number;
  /** 'f16' / 'bf16' halve the bytes on the wire, 'i8' quarters them (float32 accumulation; src/protocol/codec.ts). Default 'f32'. */
  wire?: WireFormat;
  /**
   * Error feedback (src/protocol/codec.ts), as long as `grad`: what the wire loses of every value this peer
   * encodes is added here, for the caller to add into its next contribution. Absent: dropped.
   */
  feedback?: Float32Array;
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
  /**
   * A verifying job's hop records (hop-record.ts), as long as `grad`: what came from prev and went to
   * next in the reduce-scatter and the all-gather, as the wire carried it, and where the all-gather's
   * owned, first and last chunks lie. `relayTamper`: a relay tamperer's change (the attack tests only).
   */
  hops?: HopView & Partial<HopNotes> & { relayTamper?: RelayTamper | null };
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
  const least = minFrameBytes(wire, HEADER_BYTES);
  if (!(grad instanceof Float32Array)) throw new RingError('bad-input', ring.selfId, 'the gradient must be one Float32Array');
  if (!Number.isInteger(messageBytes) || messageBytes < least || messageBytes > MAX_FRAME_BYTES) {
    throw new RingError('bad-input', ring.selfId, `messageBytes ${messageBytes} must be an integer in [${least}, ${MAX_FRAME_BYTES}]`);
  }
  if (grad.length > 0xffffffff) throw new RingError('bad-input', ring.selfId, 'more than 2^32 elements');
  if (opts.hops && [opts.hops.received, opts.hops.forwarded, opts.hops.gatherOut, opts.hops.gatherIn].some((b) => b.length !== grad.length)) {
    throw new RingError('bad-input', ring.selfId, `the hop records are not as long as the gradient (${grad.length} floats)`);
  }
  if (opts.feedback && opts.feedback.length !== grad.length) {
    throw new RingError('bad-input', ring.selfId, `the error feedback buffer has ${opts.feedback.length} floats, the gradient ${grad.length}`);
  }
  const backup = opts.keepInput ? grad.slice() : null;
  const segElems = elementsPerFrame(wire, messageBytes, HEADER_BYTES);
  const c = new Collective(grad, ring, step, wire, segElems, opts.onFirstFrame, opts.maxRms, opts.feedback ?? null, opts.hops ?? null);
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

/** One ring step on the link into some rank: the chunk that flows, where it lies, in how many frames. */
export interface LinkStep {
  phase: Phase;
  chunk: number;
  /** [start, end) of the chunk in the flat gradient. */
  start: number;
  end: number;
  /** Data frames of this step: ceil((end - start) / segElems), 0 for an empty chunk. */
  segments: number;
}

const mod = (a: number, n: number): number => ((a % n) + n) % n;

/**
 * The data frames on the link from rank-1 into `rank` in one all-reduce of `length` elements
 * over a ring of n, ring step by ring step (2n-2 steps). The receiver walks
 * linkSchedule(rank), the sender linkSchedule(rank + 1): one function, so both ends agree.
 */
export function linkSchedule(rank: number, length: number, n: number, segElems: number): LinkStep[] {
  return ringSteps(mod(rank, n), n).map(({ phase, recvChunk }) => {
    const [start, end] = ringChunkRange(recvChunk, length, n, segElems);
    return { phase, chunk: recvChunk, start, end, segments: segmentCount(end - start, segElems) };
  });
}

/** [offset, length] of data frame j of a ring step, in elements of the flat gradient. */
export function frameRange(s: LinkStep, j: number, segElems: number): [number, number] {
  const off = s.start + j * segElems;
  return [off, Math.min(segElems, s.end - off)];
}

const PHASE_NAME: Record<Phase, string> = { [Phase.reduceScatter]: 'reduce-scatter', [Phase.allGather]: 'all-gather' };

/** Where a data frame header falls in a schedule: [ring step, segment], or null if it is no frame of it. */
export function locateFrame(
  schedule: readonly LinkStep[], h: Pick<FrameHeader, 'phase' | 'chunk' | 'offset' | 'length'>, segElems: number,
): [number, number] | null {
  for (let t = 0; t < schedule.length; t++) {
    const s = schedule[t];
    if (s.phase !== h.phase || s.chunk !== h.chunk || h.offset < s.start || (h.offset - s.start) % segElems !== 0) continue;
    const j = (h.offset - s.start) / segElems;
    if (j < s.segments && frameRange(s, j, segElems)[1] === h.length) return [t, j];
  }
  return null;
}

/** What differs between the sender's plan and the one this receiver expects of it ('' when none). */
export function planMismatch(theirs: CollectivePlan, expected: CollectivePlan): string {
  const diff: string[] = [];
  if (theirs.length !== expected.length) diff.push(`gradient length ${theirs.length} there, ${expected.length} here`);
  if (theirs.ringSize !== expected.ringSize) diff.push(`ring size ${theirs.ringSize} there, ${expected.ringSize} here`);
  if (theirs.rank !== expected.rank) diff.push(`the sender is rank ${theirs.rank} there, rank ${expected.rank} here`);
  if (theirs.segElems !== expected.segElems) diff.push(`${theirs.segElems} elements per frame there, ${expected.segElems} here`);
  return diff.join('; ');
}

class Collective extends ReceiveWaits implements CollectiveSink {
  readonly step: number;
  /** Frames into this peer (from prev) and out of it (to next), per ring step. */
  private readonly recv: LinkStep[];
  private readonly send: LinkStep[];
  /** Segments received (and applied) per ring step. */
  private readonly got: Int32Array;
  private recvT = 0;
  private recvJ = 0;
  /** prev's PLAN frame arrived and matches ours: data frames may be read. */
  private planned = false;

  constructor(
    private readonly grad: Float32Array,
    private readonly ring: Ring,
    step: number,
    private readonly wire: WireFormat,
    private readonly segElems: number,
    private onFirstFrame?: () => void,
    private readonly maxRms = Number.POSITIVE_INFINITY,
    private readonly feedback: Float32Array | null = null,
    private readonly hops: AllReduceOptions['hops'] | null = null,
  ) {
    super();
    this.step = step;
    this.recv = linkSchedule(ring.rank, grad.length, ring.size, segElems);
    this.send = linkSchedule(ring.rank + 1, grad.length, ring.size, segElems);
    this.got = new Int32Array(this.recv.length);
    this.skipEmpty();
  }

  /** What this peer sends in its PLAN frame. */
  private plan(rank: number): CollectivePlan {
    return { ringSize: this.ring.size, rank, length: this.grad.length, segElems: this.segElems };
  }

  /** Moves the receive cursor past ring steps with nothing left to receive. */
  private skipEmpty(): void {
    while (this.recvT < this.recv.length && this.recvJ >= this.recv[this.recvT].segments) {
      this.recvT++;
      this.recvJ = 0;
    }
    // Complete only once prev's PLAN frame is in: nothing of this step may arrive after we end.
    if (this.planned && this.recvT === this.recv.length) this.resolveReceived();
  }

  data(h: FrameHeader, frame: Uint8Array): void {
    if (this.onFirstFrame) {
      this.onFirstFrame();
      this.onFirstFrame = undefined;
    }
    const from = this.ring.prev?.remoteId ?? this.ring.selfId;
    const refuse = (why: string) => new RingError('bad-frame', from, `generation ${this.ring.generation} step ${this.step}: ${why}`, this.ring.selfId);
    if (h.kind === FrameKind.plan) return this.checkPlan(h, frame, refuse);
    if (!this.planned) throw refuse(`a frame came before the sender's PLAN frame (a sender of an older protocol?): ${this.outOfSequence(h)}`);
    if (this.recvT === this.recv.length) throw refuse(`frame after the collective was complete: ${this.outOfSequence(h)}`);
    const st = this.recv[this.recvT];
    const [off, len] = frameRange(st, this.recvJ, this.segElems);
    if (h.kind !== FrameKind.data || h.phase !== st.phase || h.chunk !== st.chunk || h.offset !== off || h.length !== len || h.dtype !== this.wire) {
      throw refuse(`frame out of sequence: ${this.outOfSequence(h)}`);
    }
    // A gradient is checked before it is added in: one NaN or Inf from a broken or hostile peer
    // would spread to every weight of every peer. The sender (prev) is blamed.
    const { bad, rms } = inspectPayload(frame.subarray(HEADER_BYTES), this.wire, len, Number.isFinite(this.maxRms));
    if (bad >= 0) throw refuse(`non-finite value at element ${off + bad} (phase ${st.phase}, chunk ${st.chunk})`);
    if (rms > this.maxRms) {
      throw refuse(`values far too large: RMS ${rms.toExponential(2)} over the bound ${this.maxRms.toExponential(2)} `
        + `(phase ${st.phase}, chunk ${st.chunk}, offset ${off})`);
    }
    // Reduce-scatter adds the payload in, all-gather copies it.
    const payload = frame.subarray(HEADER_BYTES);
    if (this.hops) this.recordReceived(st.phase, off, len, payload);
    decodePayload(frame.subarray(HEADER_BYTES), this.grad.subarray(off, off + len), this.wire, st.phase === Phase.allGather ? 'set' : 'add');
    this.got[this.recvT]++;
    this.recvJ++;
    this.ring.progress();
    this.skipEmpty();
    this.wake();
  }

  /** prev's PLAN frame: it must describe the same collective as ours, with prev one rank before us. */
  private checkPlan(h: FrameHeader, frame: Uint8Array, refuse: (why: string) => RingError): void {
    const theirs = parsePlan(frame);
    if (!theirs) throw refuse('unreadable PLAN frame');
    if (this.planned) throw refuse('a second PLAN frame in one collective');
    const n = this.ring.size;
    const expected = this.plan(mod(this.ring.rank - 1, n));
    const diff = [planMismatch(theirs, expected), h.dtype !== this.wire ? `${h.dtype} wire there, ${this.wire} here` : ''].filter((d) => d).join('; ');
    if (diff) {
      throw refuse(
        `the sender's collective is not this peer's (${diff}): it sums ${theirs.length} floats as rank ${theirs.rank} of ${theirs.ringSize}, ` +
          `this peer ${this.grad.length} floats as rank ${this.ring.rank} of ${n} [${this.ring.ids.join(', ')}]; every peer of a generation must be given ` +
          'the same gradient length, wire and message size and the same ring order (check the model and the ring assignment)',
      );
    }
    this.planned = true;
    this.ring.progress();
    this.skipEmpty();
  }

  /** A data frame that is not the next one of the schedule, with everything needed to tell why. */
  private outOfSequence(h: FrameHeader): string {
    const kind = h.kind === FrameKind.data ? '' : `a frame of kind ${h.kind}, `;
    const got = `got ${kind}${h.dtype} phase ${h.phase} chunk ${h.chunk} offset ${h.offset} length ${h.length}`;
    const mine = `this peer's schedule: gradient length ${this.grad.length}, rank ${this.ring.rank} of ${this.ring.size}, ${this.segElems} elements per frame`;
    const at = h.kind === FrameKind.data && h.dtype === this.wire ? locateFrame(this.recv, h, this.segElems) : null;
    const where = at
      ? `that is segment ${at[1]} of ring step ${at[0]} of ${mine}`
      : `that is no frame of ${mine}`;
    const st = this.recv[this.recvT];
    if (!st) return `${got}; ${where}`;
    const [off, len] = frameRange(st, this.recvJ, this.segElems);
    return (
      `at ring step ${this.recvT} of ${this.recv.length} (${PHASE_NAME[st.phase]}), segment ${this.recvJ} of ${st.segments} ` +
      `of chunk ${st.chunk} [${st.start}, ${st.end}) (${this.got[this.recvT]} received), ` +
      `expected ${this.wire} phase ${st.phase} chunk ${st.chunk} offset ${off} length ${len}, ${got}; ${where}`
    );
  }

  async sendAll(): Promise<void> {
    const { ring, grad, wire, segElems } = this;
    const link = ring.next;
    if (!link) return;
    const high = ring.settings.highWaterBytes;
    const n = ring.size;
    if (this.error) throw this.error;
    ring.sendNext(planFrame(ring, this.step, wire, this.plan(ring.rank)));
    for (let t = 0; t < this.send.length; t++) {
      const st = this.send[t];
      for (let j = 0; j < st.segments; j++) {
        // Step t sends the chunk received at step t-1 (segment j once it has arrived).
        while (t > 0 && this.got[t - 1] <= j) await this.next();
        while (link.bufferedAmount > high) await this.next();
        if (this.error) throw this.error;
        const [off, len] = frameRange(st, j, segElems);
        // The owner's sum (the last reduce-scatter step) goes out rounded on a lossy wire: it keeps the rounded values.
        const fb = this.feedback?.subarray(off, off + len);
        const at = { phase: st.phase, dtype: wire, step: this.step, chunk: st.chunk, offset: off };
        const frame = dataFrame(ring, at, this.relayed(t, off, len), t === n - 1, fb);
        if (this.hops) this.recordSent(t, off, len, frame);
        ring.sendNext(frame);
      }
    }
  }

  /** The values a data frame of send step `t` carries: the gradient's, or a relay tamperer's copy of them (the attack tests). */
  private relayed(t: number, off: number, len: number): Float32Array {
    const values = this.grad.subarray(off, off + len);
    const tamper = this.hops?.relayTamper;
    if (!tamper || t < this.ring.size) return values;
    const copy = values.slice();
    tamper(copy);
    return copy;
  }

  /** A verifying job's record of what a data frame of send step `t` carried (hop-record.ts), decoded as next will decode it. */
  private recordSent(t: number, off: number, len: number, frame: Uint8Array): void {
    const hops = this.hops!;
    const n = this.ring.size;
    const into = t < n - 1 ? hops.forwarded : hops.gatherOut;
    decodePayload(frame.subarray(HEADER_BYTES), into.subarray(off, off + len), this.wire, 'set');
    if (t === n - 1) hops.noteOwned?.(off, len);
  }

  /** A verifying job's record of a received data frame (hop-record.ts): the all-gather's first and last chunks noted. */
  private recordReceived(phase: Phase, off: number, len: number, payload: Uint8Array): void {
    const hops = this.hops!;
    const n = this.ring.size;
    decodePayload(payload, (phase === Phase.reduceScatter ? hops.received : hops.gatherIn).subarray(off, off + len), this.wire, 'set');
    if (phase !== Phase.allGather) return;
    // In a ring of 2 the one chunk received is both.
    if (this.recvT === n - 1) hops.noteFirst?.(off, len);
    if (this.recvT === 2 * n - 3) hops.noteLast?.(off, len);
  }
}

/** Bytes this peer sends in allReduceSum of `length` floats with the default frames (f32 wire unless given), its PLAN frame included. */
export function allReduceSentBytes(rank: number, length: number, ringSize: number, wire: WireFormat = 'f32', messageBytes = DEFAULT_MESSAGE_BYTES): number {
  const plan = ringSize > 1 ? PLAN_FRAME_BYTES : 0;
  const segElems = elementsPerFrame(wire, messageBytes, HEADER_BYTES);
  return plan + sentBytes(rank, length, ringSize, segElems, BYTES_PER_ELEMENT[wire], HEADER_BYTES + PAYLOAD_EXTRA[wire]);
}
