// The hop checks of a verified step over a flat ring (issue 46; docs/trust.md): each member's
// records of what it received and sent (src/comm/hop-record.ts), sketched under the step's seed,
// against its contribution and against its neighbours' records. Pure.
//
// Over a ring of n, member r receives from r-1 the reduce-scatter's partial sums of n-1 chunks,
// adds its contribution to each and sends the result to r+1 (the chunk it completes last is the
// one it owns, and sends first in the all-gather). So, in sketches (linear):
//   local  forwarded_r + owned_r = received_r + own_r, up to one rounding of each value sent
//          (float32's add, then the wire's): a member whose records break it sent something
//          other than its contribution plus what it received, or reported it falsely;
//   link   forwarded_r = received_{r+1} and owned_r = gathered_{r+1}, the same bits decoded at
//          both ends: where they differ, one of the two reports falsely, and the sketches cannot
//          say which (hop-evidence.ts names a member once it disagrees with enough others).
// That the chunk sums add up to the ring's sum follows from the links and the members' equal
// totals (the sum check, trust-check.ts).
// In a hearing (members' weights differ after a verified step: audits.ts), the all-gather's relays
// too, under a seed drawn after every value was sent:
//   relay  relayOut_r = relayed_r, bit for bit: it sent on what it received but the last chunk;
//   link   relayOut_r = relayIn_{r+1}: what it relayed is what its successor received after the first.
// A relay tamperer fails its own relay check, or its link to its successor (or to its predecessor,
// where it reports receiving what it did not), so honest members never disagree with each other.
// A member that sends other than it reports can pass its own local check only by reporting what
// it did not send, which its successor's records contradict; it cannot aim a false report at a
// sketch it does not know, since the seed comes from the weights after the step.
import type { HopSketches, RelaySketches } from '../src/trust/hop-sketch.ts';
import { addSketches, type GradientSketch } from '../src/trust/sketch.ts';
import { WIRE_EPS, Z_LIMIT, type CheckedWire } from './trust-check.ts';

export type { HopSketches, RelaySketches };

/**
 * How far apart two sketches of the same bits may be, relative to a bucket's norm: both ends sketch the
 * same values in the same order (equal bits), so only a different float64 summation would part them
 * (about 1e-16 of it).
 */
export const SAME_BITS_REL = 1e-9;

export interface HopVerdict {
  /** Members (ranks) whose records do not add up, with the worst bucket in units of the rounding. */
  local: { rank: number; bucket: number; z: number }[];
  /** Members (ranks) that relayed in the all-gather other than what they received (checked in a hearing only). */
  relays: number[];
  /** Ranks r whose link to r + 1 disagrees: what r reports it sent is not what r + 1 reports it received. */
  links: number[];
}

/** Whether `a` and `b` sketch the same bits (their sums and squares, within SAME_BITS_REL of each bucket's norm). */
export function sameBits(a: GradientSketch, b: GradientSketch): boolean {
  if (a.seed !== b.seed || a.sums.length !== b.sums.length) return false;
  for (let i = 0; i < a.sums.length; i++) {
    const squares = Math.max(a.squares[i]!, b.squares[i]!);
    const sums = Math.abs(a.sums[i]! - b.sums[i]!) <= SAME_BITS_REL * Math.sqrt(squares) + Number.MIN_VALUE;
    if (!sums || !(Math.abs(a.squares[i]! - b.squares[i]!) <= SAME_BITS_REL * squares + Number.MIN_VALUE)) return false;
  }
  return true;
}

/**
 * The local check of one member: its records against its contribution `own`, over `wire`. Each value it
 * sent was rounded twice at most (float32's add, the wire's), each error uniform within eps of it: a
 * bucket's error has a standard deviation of at most eps sqrt(squares / 3) of the values sent there.
 */
export function localCheck(own: GradientSketch, h: HopSketches, wire: CheckedWire): { ok: boolean; bucket: number; z: number } {
  const into = addSketches([h.received, own]);
  const out = addSketches([h.forwarded, h.owned]);
  const eps = Math.hypot(WIRE_EPS[wire], WIRE_EPS.f32);
  let worst = { bucket: 0, z: 0 };
  for (let b = 0; b < out.sums.length; b++) {
    // The member's own squares could widen its tolerance: those of what came in and of its contribution bound them (|x + y|^2 <= 2 (x^2 + y^2)).
    const squares = Math.min(out.squares[b]!, 2 * into.squares[b]!);
    const sigma = eps * Math.sqrt(squares / 3) + Number.MIN_VALUE;
    const z = Math.abs(out.sums[b]! - into.sums[b]!) / sigma;
    if (z > worst.z || Number.isNaN(z)) worst = { bucket: b, z: Number.isNaN(z) ? Infinity : z };
  }
  return { ok: worst.z <= Z_LIMIT, ...worst };
}

/**
 * The hop checks of a verified step: `own` (each member's contribution) and `hops` by rank (ring order); the relays too
 * where every member's hops have them (a hearing).
 */
export function hopCheck(own: readonly GradientSketch[], hops: readonly (HopSketches & Partial<RelaySketches>)[], wire: CheckedWire): HopVerdict {
  const n = hops.length;
  if (own.length !== n) throw new RangeError(`a hop check needs each member's contribution and records (${own.length} and ${n})`);
  const withRelays = hops.every((h) => h.relayOut && h.relayIn && h.relayed);
  const local: HopVerdict['local'] = [];
  const relays: number[] = [];
  const links: number[] = [];
  for (let r = 0; r < n; r++) {
    const h = hops[r]!;
    const v = localCheck(own[r]!, h, wire);
    if (!v.ok) local.push({ rank: r, bucket: v.bucket, z: v.z });
    const next = hops[(r + 1) % n]!;
    let agree = sameBits(h.forwarded, next.received) && sameBits(h.owned, next.gathered);
    if (withRelays) {
      if (!sameBits(h.relayOut!, h.relayed!)) relays.push(r);
      agree &&= sameBits(h.relayOut!, next.relayIn!);
    }
    if (!agree) links.push(r);
  }
  return { local, relays, links };
}
