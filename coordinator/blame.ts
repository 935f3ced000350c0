// Whom to blame when a ring could not form: "connect-failed" reports name an edge (reporter,
// peer it could not reach), but a link that does not open fails for both ends alike, so the
// first report alone does not say which end is at fault. The peer that appears in the most
// failed edges is the one nobody can reach (a newcomer behind a NAT fails with both its
// neighbours; each of them fails only with it). Ties go to the newest member of the ring (the
// ring worked before it came): ring order is the survivors, then the joiners.
import type { RingErrorKind } from '../src/comm/errors.ts';

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

/**
 * A link that closes or goes quiet in a generation's first step may be a formation race rather
 * than a fault: one end saw its side of a connection attempt fail and dialed again, while the
 * other end had already taken that attempt as its ring link (it then reports the link closed,
 * or silent, while the blamed peer is still forming). So a blamed peer that is still connected
 * gets the ring formed again with it once, as a new generation whose members keep their sums
 * (no image is computed twice); at most once per FORM_AGAIN_WINDOW_MS, so a peer whose links
 * keep failing is evicted at its next failure. Other failures (bad frames, stale or stalled
 * rings) are evicted at once, as are failures after a generation's first step.
 */
export const FORM_AGAIN_WINDOW_MS = 60_000;

/** The failures of a generation's first step that may be formation races. */
const RACE_KINDS: ReadonlySet<RingErrorKind> = new Set<RingErrorKind>(['peer-closed', 'peer-timeout']);

/** Whether a ring failure of `kind` blaming a still-connected peer (given a re-formed ring last at `lastAgain`) forms the ring again instead of evicting it (pure). */
export function formAgain(kind: RingErrorKind, firstStepOfGeneration: boolean, lastAgain: number | undefined, now: number): boolean {
  return RACE_KINDS.has(kind) && firstStepOfGeneration && (lastAgain === undefined || now - lastAgain >= FORM_AGAIN_WINDOW_MS);
}
