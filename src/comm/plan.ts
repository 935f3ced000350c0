// Pure index arithmetic of the ring all-reduce (Baidu / Patarasuk-Yuan): the flat buffer is cut
// into N nearly equal chunks; each chunk into messages ("segments") of at most `segElems`.
// A buffer of fewer than N messages is cut into fewer chunks (dataChunks), none smaller than
// one message: the chunks past them are empty and take no frames. A tiny gradient thus goes
// round as one chunk, in the same 2(N-1) hops one after another, but each peer sends 2 frames
// instead of 2(N-1): every frame costs both ends CPU (WebRTC's SCTP and DTLS, the receive),
// and frames of a few bytes gain nothing from being spread over every link.
//
// Ring step t = 0 .. 2N-3. For t < N-1 (reduce-scatter, k = t) rank r sends chunk r-k and
// receives chunk r-k-1, adding it in. For t >= N-1 (all-gather, k = t-N+1) rank r sends chunk
// r+1-k and receives chunk r-k, copying it. After reduce-scatter rank r owns the full sum of
// chunk r+1; the all-gather passes every owned chunk once around the ring.
// The send of (t, segment j) needs the receive of (t-1, segment j): same chunk, same segment.

import { Phase } from '../protocol/frames.ts';

export interface RingStep {
  phase: Phase;
  sendChunk: number;
  recvChunk: number;
}

const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** [start, end) of chunk c when `length` elements are split into n chunks (sizes differ by <= 1). */
export function chunkRange(c: number, length: number, n: number): [number, number] {
  return [Math.floor((c * length) / n), Math.floor(((c + 1) * length) / n)];
}

/**
 * How many chunks carry data when `length` elements go round a ring of n in messages of
 * `segElems`: n, or fewer when the buffer is under n messages (one message each, at least 1).
 */
export function dataChunks(length: number, n: number, segElems: number): number {
  return Math.max(1, Math.min(n, Math.ceil(length / segElems)));
}

/** [start, end) of chunk c of the ring all-reduce: the first dataChunks() chunks tile the buffer, the others are empty. */
export function ringChunkRange(c: number, length: number, n: number, segElems: number): [number, number] {
  const k = dataChunks(length, n, segElems);
  return c < k ? chunkRange(c, length, k) : [length, length];
}

export function ringSteps(rank: number, n: number): RingStep[] {
  const steps: RingStep[] = [];
  for (let k = 0; k < n - 1; k++) steps.push({ phase: Phase.reduceScatter, sendChunk: mod(rank - k, n), recvChunk: mod(rank - k - 1, n) });
  for (let k = 0; k < n - 1; k++) steps.push({ phase: Phase.allGather, sendChunk: mod(rank + 1 - k, n), recvChunk: mod(rank - k, n) });
  return steps;
}

/** Number of segments of a chunk of `len` elements. */
export function segmentCount(len: number, segElems: number): number {
  return Math.ceil(len / segElems);
}

/** [offset, length] of segment j of chunk c, in elements of the flat buffer. */
export function segmentRange(c: number, j: number, length: number, n: number, segElems: number): [number, number] {
  const [start, end] = ringChunkRange(c, length, n, segElems);
  const off = start + j * segElems;
  return [off, Math.min(segElems, end - off)];
}

/**
 * Bytes rank `rank` sends in one all-reduce of `length` elements over a ring of n: every chunk
 * it sends (2(n-1) of them) as segments of at most `segElems`, each with its frame header.
 */
export function sentBytes(rank: number, length: number, n: number, segElems: number, bytesPerElement: number, headerBytes: number): number {
  if (n < 2) return 0;
  let total = 0;
  for (const s of ringSteps(rank, n)) {
    const [start, end] = ringChunkRange(s.sendChunk, length, n, segElems);
    total += (end - start) * bytesPerElement + segmentCount(end - start, segElems) * headerBytes;
  }
  return total;
}
