// What one peer sent and received in the ring's collectives of a step, kept for the hop checks
// of a verifying job (issue 46; coordinator/hop-check.ts, docs/trust.md).
//
// The ring hides each peer's contribution inside partial sums: member i receives a partial sum
// of chunk c from its predecessor, adds its own part of c and sends the result on. A member that
// sends into the ring something other than its contribution (and reports the honest one's
// sketch) is found where its records stop adding up, or where its successor's disagree with it:
//   received   the reduce-scatter's partial sums that came from prev (n - 1 chunks);
//   forwarded  the partial sums this peer sent to next (n - 1 chunks), as the wire carried them;
//   owned      the chunk whose sum this peer formed, as it sent it first in the all-gather;
//   gathered   the chunk prev formed, as it came first in the all-gather.
// Every value is recorded as the wire decodes it (the sender decodes its own frame), so what one
// end forwarded and the other received are the same bits, and so are their sketches. An honest
// member's forwarded + owned is its received + its contribution, up to one rounding per value.
// Each buffer is as long as the gradient, zero where the peer sent or received nothing; the
// sketches are made after the step, under a seed nobody knew while the values were sent.

/** The records of one collective: views of a HopRecord's buffers over the collective's part of the gradient. */
export interface HopView {
  received: Float32Array;
  forwarded: Float32Array;
  owned: Float32Array;
  gathered: Float32Array;
}

/** A step's hop records over the whole gradient (each bucket's collective writes its own range). */
export class HopRecord implements HopView {
  readonly received: Float32Array;
  readonly forwarded: Float32Array;
  readonly owned: Float32Array;
  readonly gathered: Float32Array;
  /** [start, end) ranges of the gradient in `owned` (the rest of what this peer sent is in `forwarded`). */
  readonly ownedRanges: [number, number][] = [];

  constructor(readonly length: number) {
    this.received = new Float32Array(length);
    this.forwarded = new Float32Array(length);
    this.owned = new Float32Array(length);
    this.gathered = new Float32Array(length);
  }

  /** The views of [start, end) for one collective (a bucket of the gradient). */
  view(start: number, end: number): HopView & { noteOwned(off: number, len: number): void } {
    if (!(start >= 0 && start <= end && end <= this.length)) throw new RangeError(`a hop view [${start}, ${end}) outside a record of ${this.length}`);
    return {
      received: this.received.subarray(start, end),
      forwarded: this.forwarded.subarray(start, end),
      owned: this.owned.subarray(start, end),
      gathered: this.gathered.subarray(start, end),
      noteOwned: (off, len) => { this.ownedRanges.push([start + off, start + off + len]); },
    };
  }
}
