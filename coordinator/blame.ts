// Whom to blame when a ring could not form: "connect-failed" reports name an edge (reporter,
// peer it could not reach), but a link that does not open fails for both ends alike, so the
// first report alone does not say which end is at fault. The peer that appears in the most
// failed edges is the one nobody can reach (a newcomer behind a NAT fails with both its
// neighbours; each of them fails only with it). Ties go to the newest member of the ring (the
// ring worked before it came): ring order is the survivors, then the joiners.

/** The ring member to evict for a set of failed edges (pure). */
export function blameUnreachable(ring: readonly string[], edges: readonly (readonly [string, string])[]): string {
  const count = new Map<string, number>();
  for (const [a, b] of edges) {
    for (const id of new Set([a, b])) if (ring.includes(id)) count.set(id, (count.get(id) ?? 0) + 1);
  }
  let best: string | null = null;
  let bestCount = 0;
  // Later members win ties: walk from the newest.
  for (let i = ring.length - 1; i >= 0; i--) {
    const c = count.get(ring[i]!) ?? 0;
    if (c > bestCount) { best = ring[i]!; bestCount = c; }
  }
  return best ?? ring[ring.length - 1]!;
}

/** How long the coordinator collects connect-failed reports of one ring before it decides. */
export const UNREACHABLE_GRACE_MS = 1500;
