// The coordinator's side of the two-level all-reduce (src/comm/topology.ts, hierarchical.ts):
// what it learns of each peer's links from its step results, and the plan of a generation.
//
// A generation of `twoLevelFrom` peers or more (job setting; 0: never) is cut into groups by
// planTopology from the links measured so far: direct before relayed (a result that reports a
// TURN relay on either of its ring links marks the peer relayed), then by the bandwidth its
// all-reduces showed (bytes it sent over the time it spent sending and receiving: a running
// mean), unmeasured peers last. The ring of the generation is then the plan's groups one after
// the other, so `ring`, the ranks of the assignments and the topology they carry agree. The
// plan is made once per generation (membership changes only there), never per step, and from
// the previous generation's plan where it can be kept (stable-plan.ts), so that a join or a
// leave changes few neighbours.
import type { StepResult } from '../src/protocol/messages.ts';
import { MIN_TWO_LEVEL_PEERS, planTopology, type PeerLinkInfo, type Topology } from '../src/comm/topology.ts';
import { adaptTopology } from './stable-plan.ts';

/** The default of the job's `twoLevelFrom`: the size from which a generation all-reduces in two levels. */
export const DEFAULT_TWO_LEVEL_FROM = MIN_TWO_LEVEL_PEERS;

/** What the step results of a peer have shown of its links (nothing yet: {}). */
export interface LinkObservation {
  /** Running mean of sentBytes / commMs of its all-reduces of MIN_BANDWIDTH_SAMPLE_BYTES or more, bytes/s. */
  bandwidth?: number;
  /** Its latest result reported a TURN relay on a ring link. */
  relayed?: boolean;
}

/** Weight of the newest measurement in the running bandwidth. */
const NEWEST = 0.3;

/**
 * The least a peer must have sent in one all-reduce for its time to say anything of bandwidth.
 * Below it the time is the ring's message latencies and the waits for the slowest member: the
 * tiny CNN's 1.5 KB all-reduces "measured" 60 KB/s to 70 MB/s in one churn run, so peers were
 * called slow at random, and 30 of 43 generations were planned afresh (every link new: a ring
 * formed after a crash took 400-950 ms instead of about 100).
 */
export const MIN_BANDWIDTH_SAMPLE_BYTES = 1 << 20;

/** `prev` updated with one step result (pure). */
export function observeLinks(prev: LinkObservation, r: Pick<StepResult, 'link' | 'linkPrev' | 'sentBytes' | 'timings'>): LinkObservation {
  const out: LinkObservation = { ...prev };
  if (r.link !== undefined || r.linkPrev !== undefined) out.relayed = r.link === 'relayed' || r.linkPrev === 'relayed';
  const bytes = r.sentBytes ?? 0;
  if (bytes >= MIN_BANDWIDTH_SAMPLE_BYTES && r.timings.commMs > 0) {
    const bw = bytes / (r.timings.commMs / 1000);
    out.bandwidth = prev.bandwidth === undefined ? bw : (1 - NEWEST) * prev.bandwidth + NEWEST * bw;
  }
  return out;
}

export interface GenerationPlan {
  /** The ring in the plan's order (the groups one after the other), or as given when flat. */
  ring: string[];
  /** The two-level topology, or null for a flat ring. */
  topology: Topology | null;
}

/**
 * The plan of a generation of `ring` (pure): flat below `twoLevelFrom` peers (0: always flat)
 * and when the plan would have a single group; else the previous generation's groups adapted
 * to the new members (stable-plan.ts: unchanged neighbours keep their links), or, without one
 * or when it cannot be kept, the groups of planTopology.
 */
export function planGeneration(
  ring: readonly string[], linksOf: (id: string) => LinkObservation | undefined, twoLevelFrom: number, previous: Topology | null = null,
): GenerationPlan {
  if (twoLevelFrom === 0 || ring.length < Math.max(2, twoLevelFrom)) return { ring: [...ring], topology: null };
  const kept = previous ? adaptTopology(previous, ring, linksOf) : null;
  if (kept) return { ring: kept.groups.flat(), topology: kept };
  const peers: PeerLinkInfo[] = ring.map((id) => ({ id, ...linksOf(id) }));
  const topology = planTopology(peers, { minTwoLevel: twoLevelFrom });
  if (topology.groups.length < 2) return { ring: [...ring], topology: null };
  return { ring: topology.groups.flat(), topology };
}
