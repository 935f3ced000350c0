// The next generation's two-level plan made from the previous one, so that a membership change
// moves as few peers as possible: every neighbour pair that stays the same keeps its open WebRTC
// link (src/comm/peer-endpoint.ts reuses it), where a plan made afresh from the measured links
// (planTopology's speed order, which shifts with every bandwidth sample) would give most peers
// new neighbours and the whole ring new connections at each join or leave.
//
// From the previous groups (pure, deterministic):
//   - a member that left is replaced in place by its group's last member (the group's ring and
//     the columns of everyone else are unchanged; a leaver at the end just goes);
//   - a joiner goes to the end of the smallest group (no one moves for it);
//   - groups whose sizes differ by more than one are evened out by moving the last member of
//     the largest group to the end of the smallest;
// and the plan is made afresh (null here) when the kept one would break what the fresh plan
// guarantees: fewer than two groups, a group count two or more away from round(sqrt N) (one
// away is kept: a hop more or less per all-reduce costs less than a whole new ring), or a slow
// peer before a fast one in a group's ring (slow links sit at a group's end, next to the
// wrap-around). Slow: relayed (TURN), or a measured bandwidth under SLOW_FRACTION of the
// median measured one (jitter between similar links does not reorder anything).
import { checkTopology, topologyOfGroups, type Topology } from '../src/comm/topology.ts';

export interface KnownLinks {
  relayed?: boolean;
  /** Measured bytes/s of its all-reduces (absent: not measured yet). */
  bandwidth?: number;
}

/** A peer whose measured bandwidth is under this fraction of the median is slow. */
export const SLOW_FRACTION = 0.5;

/** The previous plan adapted to `ring`'s members, or null when a fresh plan is needed (see the header). */
export function adaptTopology(previous: Topology, ring: readonly string[], linksOf: (id: string) => KnownLinks | undefined): Topology | null {
  const present = new Set(ring);
  const groups: string[][] = previous.groups.map((g) => removeLeavers(g, present)).filter((g) => g.length > 0);
  const placed = new Set(groups.flat());
  for (const id of ring) {
    if (placed.has(id)) continue;
    smallest(groups)?.push(id);
    placed.add(id);
  }
  const target = Math.round(Math.sqrt(ring.length));
  if (groups.length < 2 || Math.abs(groups.length - target) >= 2) return null;
  for (let guard = ring.length; guard > 0; guard--) {
    const lo = smallest(groups)!;
    const hi = largest(groups)!;
    if (hi.length - lo.length <= 1) break;
    lo.push(hi.pop()!);
  }
  const slow = slowPeers(ring, linksOf);
  // A slow member must not precede a fast one in its group's ring.
  if (groups.some((g) => g.some((id, i) => slow.has(id) && g.slice(i + 1).some((later) => !slow.has(later))))) return null;
  const topology = topologyOfGroups(groups);
  checkTopology(topology);
  return topology;
}

/** Relayed peers, and those measured at under SLOW_FRACTION of the median measured bandwidth. */
function slowPeers(ring: readonly string[], linksOf: (id: string) => KnownLinks | undefined): Set<string> {
  const measured = ring.map((id) => linksOf(id)?.bandwidth).filter((b): b is number => b !== undefined).sort((a, b) => a - b);
  const median = measured.length ? measured[Math.floor(measured.length / 2)]! : 0;
  return new Set(ring.filter((id) => {
    const l = linksOf(id);
    return l?.relayed === true || (l?.bandwidth !== undefined && l.bandwidth < SLOW_FRACTION * median);
  }));
}

/** The group without the members not present: each replaced in place by the group's last present member. */
function removeLeavers(group: readonly string[], present: ReadonlySet<string>): string[] {
  const out = [...group];
  for (;;) {
    while (out.length > 0 && !present.has(out[out.length - 1]!)) out.pop();
    const gone = out.findIndex((id) => !present.has(id));
    if (gone < 0) return out;
    out[gone] = out.pop()!;
  }
}

/** The first of the smallest groups (null when there is none). */
function smallest(groups: string[][]): string[] | null {
  return groups.reduce<string[] | null>((best, g) => (best === null || g.length < best.length ? g : best), null);
}

/** The last of the largest groups. */
function largest(groups: string[][]): string[] | null {
  return groups.reduce<string[] | null>((best, g) => (best === null || g.length >= best.length ? g : best), null);
}
