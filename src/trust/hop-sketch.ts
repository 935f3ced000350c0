// A member's hop records (src/comm/hop-record.ts) sketched for the coordinator's hop checks
// (coordinator/hop-check.ts; issue 46, docs/trust.md). Each sketch covers one part of a record,
// hashed by gradient index, so parts that together cover the same values add up:
//   received, forwarded   the reduce-scatter's partial sums from prev and to next;
//   owned                 the chunk sums it formed and sent first in the all-gather;
//   gathered              the chunk sums prev formed, received first in the all-gather;
// and, for a hearing (a verified step whose members' weights differ: coordinator/audits.ts):
//   relayOut              what it sent in the all-gather after its own sums (what it relayed);
//   relayIn               what it received in the all-gather after prev's sums (next's relayOut);
//   relayed               what it received in the all-gather but the last chunk (its relayOut).
import { complementRanges, type HopRecord } from '../comm/hop-record.ts';
import type { HopReport, RelayHopReport, SketchReport } from '../protocol/messages.ts';
import { sketchRanges, type GradientSketch } from './sketch.ts';

export interface HopSketches { received: GradientSketch; forwarded: GradientSketch; owned: GradientSketch; gathered: GradientSketch }
export interface RelaySketches { relayOut: GradientSketch; relayIn: GradientSketch; relayed: GradientSketch }

/** The reduce-scatter's and the all-gather's first records of `h` under `seed`. */
export function sketchHops(h: HopRecord, seed: number): HopSketches {
  const all: [number, number][] = [[0, h.length]];
  return {
    received: sketchRanges(h.received, all, seed), forwarded: sketchRanges(h.forwarded, all, seed),
    owned: sketchRanges(h.gatherOut, h.ownedRanges, seed), gathered: sketchRanges(h.gatherIn, h.firstRanges, seed),
  };
}

/** The all-gather's relays of `h` under `seed`. */
export function sketchRelays(h: HopRecord, seed: number): RelaySketches {
  return {
    relayOut: sketchRanges(h.gatherOut, complementRanges(h.ownedRanges, h.length), seed),
    relayIn: sketchRanges(h.gatherIn, complementRanges(h.firstRanges, h.length), seed),
    relayed: sketchRanges(h.gatherIn, complementRanges(h.lastRanges, h.length), seed),
  };
}

/** A sketch as the protocol carries it. */
export function sketchReport(s: GradientSketch): SketchReport {
  return { sums: Array.from(s.sums), squares: Array.from(s.squares) };
}

/** A sketch the protocol carried, back as the sketch it was under `seed` (the seed is the receiver's to know: it is not sent). */
export function sketchFromReport(s: SketchReport, seed: number): GradientSketch {
  return { seed, sums: Float64Array.from(s.sums), squares: Float64Array.from(s.squares) };
}

/** StepResult.hops: `h`'s reduce-scatter and first all-gather records under `seed`. */
export function hopReport(h: HopRecord, seed: number): HopReport {
  const s = sketchHops(h, seed);
  return { received: sketchReport(s.received), forwarded: sketchReport(s.forwarded), owned: sketchReport(s.owned), gathered: sketchReport(s.gathered) };
}

/** A hearing's HopSketchesMessage.hops: all of `h` under `seed`. */
export function relayHopReport(h: HopRecord, seed: number): RelayHopReport {
  const r = sketchRelays(h, seed);
  return { ...hopReport(h, seed), relayOut: sketchReport(r.relayOut), relayIn: sketchReport(r.relayIn), relayed: sketchReport(r.relayed) };
}
