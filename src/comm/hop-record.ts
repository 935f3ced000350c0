// What one peer sent and received in the ring's collectives of a step, kept for the hop checks
// of a verifying job (issue 46; coordinator/hop-check.ts, docs/trust.md).
//
// The ring hides each peer's contribution inside partial sums: member i receives a partial sum
// of chunk c from its predecessor, adds its own part of c and sends the result on; then the
// all-gather passes each chunk's sum around the ring, each member relaying what it received. A
// member that sends into the ring something other than its contribution, or relays a sum other
// than the one it received (and reports honest records), is found where its records stop adding
// up, or where its successor's disagree with it:
//   received   the reduce-scatter's partial sums that came from prev (n - 1 chunks);
//   forwarded  the partial sums this peer sent to next (n - 1 chunks), as the wire carried them;
//   gatherOut  what it sent in the all-gather: first the chunk whose sum it formed (`ownedRanges`),
//              then the n - 2 chunks it relayed;
//   gatherIn   what it received in the all-gather: first the chunk prev formed (`firstRanges`),
//              then n - 2 more; the last (`lastRanges`, its successor's; in a ring of 2 the first)
//              it keeps, the others it relays.
// Every value is recorded as the wire decodes it (the sender decodes its own frame), so what one
// end sent and the other received are the same bits, and so are their sketches. An honest
// member's forwarded + owned is its received + its contribution, up to one rounding per value,
// and what it relayed is what it received but the last chunk, bit for bit.
// Each buffer is as long as the gradient, zero where the peer sent or received nothing (the
// all-gather's chunks are disjoint, so one buffer holds each direction); the sketches are made
// after the step, under a seed nobody knew while the values were sent (src/trust/hop-sketch.ts).

/** [start, end) ranges of a gradient. */
export type Ranges = [number, number][];

/** The records of one collective: views of a HopRecord's buffers over the collective's part of the gradient. */
export interface HopView {
  received: Float32Array;
  forwarded: Float32Array;
  gatherOut: Float32Array;
  gatherIn: Float32Array;
}

/** Where a collective's all-gather frames lie within its view (offsets from the view's start). */
export interface HopNotes {
  noteOwned(off: number, len: number): void;
  noteFirst(off: number, len: number): void;
  noteLast(off: number, len: number): void;
}

/**
 * What a relay tamperer (src/trust/adversary.ts, the attack tests only) does to each all-gather frame it relays: changes
 * `part`, a copy of the values it received, before it is sent on.
 */
export type RelayTamper = (part: Float32Array) => void;

/** A step's hop records over the whole gradient (each bucket's collective writes its own range). */
export class HopRecord implements HopView {
  readonly received: Float32Array;
  readonly forwarded: Float32Array;
  readonly gatherOut: Float32Array;
  readonly gatherIn: Float32Array;
  /** The chunk sums this peer formed and sent first in the all-gather (the rest of gatherOut it relayed). */
  readonly ownedRanges: Ranges = [];
  /** The chunk sums prev formed, received first in the all-gather. */
  readonly firstRanges: Ranges = [];
  /** The chunk sums received last in the all-gather (its successor's; in a ring of 2, prev's first): kept, not relayed. */
  readonly lastRanges: Ranges = [];
  /** A relay tamperer's change to what it relays (the attack tests); null for every honest peer. */
  relayTamper: RelayTamper | null = null;

  constructor(readonly length: number) {
    this.received = new Float32Array(length);
    this.forwarded = new Float32Array(length);
    this.gatherOut = new Float32Array(length);
    this.gatherIn = new Float32Array(length);
  }

  /**
   * Makes this record as a new one (zeros, no ranges, no tamperer), for a later step: a new record of ResNet-50 is
   * 400 MB of zero pages, each touched first by the step (about 1 s of page faults on this project's host), where
   * zeroing one already touched takes tens of milliseconds. Only once nothing writes or reads it any more.
   */
  reset(): void {
    for (const a of [this.received, this.forwarded, this.gatherOut, this.gatherIn]) a.fill(0);
    for (const r of [this.ownedRanges, this.firstRanges, this.lastRanges]) r.length = 0;
    this.relayTamper = null;
  }

  /** The views of [start, end) for one collective (a bucket of the gradient). */
  view(start: number, end: number): HopView & HopNotes & { relayTamper: RelayTamper | null } {
    if (!(start >= 0 && start <= end && end <= this.length)) throw new RangeError(`a hop view [${start}, ${end}) outside a record of ${this.length}`);
    const note = (into: Ranges) => (off: number, len: number) => { into.push([start + off, start + off + len]); };
    return {
      received: this.received.subarray(start, end),
      forwarded: this.forwarded.subarray(start, end),
      gatherOut: this.gatherOut.subarray(start, end),
      gatherIn: this.gatherIn.subarray(start, end),
      noteOwned: note(this.ownedRanges),
      noteFirst: note(this.firstRanges),
      noteLast: note(this.lastRanges),
      relayTamper: this.relayTamper,
    };
  }
}

/** `ranges` sorted and merged. */
export function mergeRanges(ranges: Ranges): Ranges {
  const sorted = ranges.filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  const out: Ranges = [];
  for (const [a, b] of sorted) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** [0, length) less `ranges`. */
export function complementRanges(ranges: Ranges, length: number): Ranges {
  const out: Ranges = [];
  let at = 0;
  for (const [a, b] of mergeRanges(ranges)) {
    if (a > at) out.push([at, Math.min(a, length)]);
    at = Math.max(at, b);
  }
  if (at < length) out.push([at, length]);
  return out;
}
