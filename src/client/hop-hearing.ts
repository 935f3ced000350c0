// A verified step's hop records kept until the step is judged, for a hearing (protocol 15;
// coordinator/audits.ts): when the members' weights differ after the step, the coordinator sends
// a fresh seed, and each member answers with its contribution and records sketched under it.
import type { HopRecord } from '../comm/hop-record.ts';
import type { HopSeed, HopSketchesMessage } from '../protocol/messages.ts';
import { relayHopReport, sketchReport } from '../trust/hop-sketch.ts';
import { sketch } from '../trust/sketch.ts';

export class HopHearing {
  private last: { step: number; generation: number; hops: HopRecord; own: Float32Array } | null = null;

  /** Keeps the records of `step` in `generation` and the contribution `own` (what went into the ring) in place of older ones. */
  keep(step: number, generation: number, hops: HopRecord, own: Float32Array): void {
    this.last = { step, generation, hops, own };
  }

  /** Lets go of what is kept (a new step begins). */
  clear(): void {
    this.last = null;
  }

  /** The answer to `m` from peer `peerId`; null when the records of its step are not kept here (nothing to answer with). */
  answer(m: HopSeed, peerId: string): HopSketchesMessage | null {
    const k = this.last;
    if (!k || k.step !== m.step || k.generation !== m.generation) return null;
    return {
      type: 'hop-sketches', peerId, generation: m.generation, step: m.step, sketch: sketchReport(sketch(k.own, m.seed)), hops: relayHopReport(k.hops, m.seed),
    };
  }
}
