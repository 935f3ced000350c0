// Shared test helpers for the ring: deterministic random gradients and a float64 oracle.

/** Deterministic pseudo-random floats in [-1, 1) (mulberry32), so failures reproduce. */
export function randomGrad(length: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 2 ** 31 - 1;
  }
  return out;
}

/** The exact sum in float64, the oracle every peer's float32 result is compared with. */
export function sum64(grads: readonly Float32Array[]): Float64Array {
  const out = new Float64Array(grads[0]?.length ?? 0);
  for (const g of grads) for (let i = 0; i < g.length; i++) out[i] += g[i];
  return out;
}

/** Worst |got - want| / (sum of |inputs| + tiny), with its index: float32 rounding of N adds. */
export function worstError(got: Float32Array, want: Float64Array, grads: readonly Float32Array[]): { index: number; rel: number } {
  let index = -1;
  let rel = 0;
  for (let i = 0; i < got.length; i++) {
    let scale = 1e-30;
    for (const g of grads) scale += Math.abs(g[i]);
    const r = Math.abs(got[i] - want[i]) / scale;
    if (!(r <= rel)) { rel = r; index = i; } // NaN counts as worst
  }
  return { index, rel };
}

/** True when a and b hold the same bits (NaN payloads included). */
export function bitwiseEqual(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

// ---- two-level all-reduce (hierarchical*.test.ts) --------------------------------------

import type { Link, LinkEvents } from '../../src/comm/link.ts';
import { memoryLinkPair, type MemoryLink } from '../../src/comm/memory-link.ts';
import { Ring, type RingSettings } from '../../src/comm/ring.ts';
import type { Topology } from '../../src/comm/topology.ts';
import { FrameKind, parseFrame } from '../../src/protocol/frames.ts';

/**
 * Counts sequential message rounds (latency terms): the longest chain of data dependencies.
 * Each peer keeps a depth per gradient element; a data frame covering elements [a, a+len) is
 * 1 + the deepest of them at its sender, and raises them to its depth at its receiver. With a
 * fixed latency per message and unlimited bandwidth the collective takes (this number) x latency.
 * `base(selfId, remoteId)` is where the buffer of the link's collective starts in the whole
 * gradient (a column ring all-reduces a shard's subarray). Wrap every link end with `wrap`.
 */
export class RoundCounter {
  private readonly depth = new Map<string, Int32Array>();
  /** Depths of the data frames in flight, by the sending end (links are ordered). */
  private readonly inFlight = new Map<MemoryLink, number[]>();
  max = 0;
  /** Data frames sent, by sender. */
  readonly framesSent = new Map<string, number>();

  constructor(private readonly length: number, private readonly base: (selfId: string, remoteId: string) => number = () => 0) {}

  readonly wrap = (link: MemoryLink, selfId: string): Link => new CountingLink(link, selfId, this);

  private region(selfId: string, remoteId: string, frame: Uint8Array): Int32Array | null {
    const p = parseFrame(frame);
    if (!p.ok || p.header.kind !== FrameKind.data) return null;
    let d = this.depth.get(selfId);
    if (!d) this.depth.set(selfId, (d = new Int32Array(this.length)));
    const a = this.base(selfId, remoteId) + p.header.offset;
    return d.subarray(a, a + p.header.length);
  }

  sent(end: MemoryLink, selfId: string, frame: Uint8Array): void {
    const r = this.region(selfId, end.remoteId, frame);
    if (!r) return;
    const depth = 1 + r.reduce((m, v) => Math.max(m, v), 0);
    this.max = Math.max(this.max, depth);
    this.framesSent.set(selfId, (this.framesSent.get(selfId) ?? 0) + 1);
    const q = this.inFlight.get(end) ?? [];
    q.push(depth);
    this.inFlight.set(end, q);
  }

  received(end: MemoryLink, selfId: string, frame: Uint8Array): void {
    const r = this.region(selfId, end.remoteId, frame);
    if (!r) return;
    const depth = this.inFlight.get(end.other)?.shift();
    if (depth === undefined) throw new Error(`RoundCounter: a data frame reached ${selfId} that no counted link sent`);
    for (let i = 0; i < r.length; i++) r[i] = Math.max(r[i], depth);
  }
}

class CountingLink implements Link {
  constructor(private readonly inner: MemoryLink, private readonly selfId: string, private readonly counter: RoundCounter) {}
  get remoteId(): string { return this.inner.remoteId; }
  get bufferedAmount(): number { return this.inner.bufferedAmount; }
  get closed(): boolean { return this.inner.closed; }
  setLowWater(bytes: number): void { this.inner.setLowWater(bytes); }
  send(data: Uint8Array): void {
    if (!this.inner.closed) this.counter.sent(this.inner, this.selfId, data);
    this.inner.send(data);
  }
  listen(events: LinkEvents): void {
    this.inner.listen({ ...events, frame: (f) => { this.counter.received(this.inner, this.selfId, f); events.frame(f); } });
  }
  close(): void { this.inner.close(); }
}

/** A flat ring over memory links whose ends pass through `wrap` (a RoundCounter's). */
export function wrappedFlatRing(ids: readonly string[], wrap: (l: MemoryLink, selfId: string) => Link, settings?: Partial<RingSettings>): Ring[] {
  const next: MemoryLink[] = [];
  const prev: MemoryLink[] = new Array<MemoryLink>(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const [a, b] = memoryLinkPair(ids[i], ids[(i + 1) % ids.length]);
    next.push(a);
    prev[(i + 1) % ids.length] = b;
  }
  return ids.map((selfId, i) => new Ring({ selfId, ids, job: 1, generation: 1, next: wrap(next[i], selfId), prev: wrap(prev[i], selfId), settings }));
}

/** [start, end) of piece c when `length` elements are cut into n pieces: floor(c L / n). */
const cut = (c: number, length: number, n: number): [number, number] => [Math.floor((c * length) / n), Math.floor(((c + 1) * length) / n)];

/** Elements per frame of the default 64 KiB f32 frames (32-byte header). */
export const DEFAULT_SEG_ELEMS = ((64 << 10) - 32) / 4;

/**
 * Piece c of a ring's cut, as src/comm/plan.ts documents it (written from that description):
 * `length` elements in n pieces, but never more pieces than frames of `segElems` (at least
 * one); the pieces past those are empty.
 */
export function ringCut(c: number, length: number, n: number, segElems: number): [number, number] {
  const pieces = Math.max(1, Math.min(n, Math.ceil(length / segElems)));
  return c < pieces ? cut(c, length, pieces) : [length, length];
}

/**
 * The two-level all-reduce's result computed here, in float32, in the order documented in
 * src/comm/hierarchical.ts (written from that description, not from the code): group sums
 * along each group's ring starting after the shard's owner, then column sums starting at the
 * column rank that owns the chunk.
 */
export function twoLevelReference(t: Topology, inputs: ReadonlyMap<string, Float32Array>, length: number, segElems = DEFAULT_SEG_ELEMS): Float32Array {
  const out = new Float32Array(length);
  const k = t.shards;
  const ng = t.groups.length;
  const x = (id: string): Float32Array => {
    const g = inputs.get(id);
    if (!g) throw new Error(`no input for ${id}`);
    return g;
  };
  for (let j = 0; j < k; j++) {
    const [a, b] = ringCut(j, length, k, segElems);
    const groupSum = (g: number, i: number): number => {
      const m = t.groups[g];
      let acc = x(m[(j + 1) % m.length])[i];
      for (let r = 2; r <= m.length; r++) acc = Math.fround(acc + x(m[(j + r) % m.length])[i]);
      return acc;
    };
    for (let c = 0; c < ng; c++) {
      const [ca, cb] = ringCut(c, b - a, ng, segElems);
      for (let i = a + ca; i < a + cb; i++) {
        let acc = groupSum(c, i);
        for (let r = 1; r < ng; r++) acc = Math.fround(acc + groupSum((c + r) % ng, i));
        out[i] = acc;
      }
    }
  }
  return out;
}

/** RoundCounter's `base` for a topology: a column link's frames count from its shard's start. */
export function twoLevelBase(t: Topology, length: number, segElems = DEFAULT_SEG_ELEMS): (selfId: string, remoteId: string) => number {
  const groupOf = new Map(t.groups.flatMap((g, gi) => g.map((id) => [id, gi] as [string, number])));
  return (selfId, remoteId) => {
    if (groupOf.get(selfId) === groupOf.get(remoteId)) return 0;
    const rank = t.groups[groupOf.get(selfId) ?? 0].indexOf(selfId);
    return ringCut(rank, length, t.shards, segElems)[0];
  };
}
