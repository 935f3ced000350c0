// Whom to blame when a ring could not form: "connect-failed" reports name an edge (reporter,
// peer it could not reach), but a link that does not open fails for both ends alike, so one
// report alone does not say which end is at fault. The evidence is weighed across generations:
// the suspect is the member that failed with the most DIFFERENT partners (peers named by their
// volunteer name, so one machine rejoining under new ids counts once), over the reports of this
// ring and those of the last EVIDENCE_WINDOW_MS, however old that member is. A newcomer behind a
// NAT fails with both its neighbours (two partners; each of them one); an old member nobody can
// reach fails with every joiner that comes, one after the other, while each joiner's only failure
// is towards it. Ties go to the member in most of this ring's failed edges, then to the newest
// member (the ring worked before it came): ring order is the survivors, then the joiners.
import type { RingErrorKind } from '../src/comm/errors.ts';

/** How long a failed link counts as evidence against its ends. */
export const EVIDENCE_WINDOW_MS = 10 * 60_000;

/** Failed links seen before, by identity (a peer's name, else its id): whom each failed with, and when last. */
export interface LinkEvidence { readonly failedWith: ReadonlyMap<string, ReadonlyMap<string, number>> }

export const noEvidence = (): LinkEvidence => ({ failedWith: new Map() });

/** The evidence with failed edges (already as identities) added at `now`, entries older than the window dropped (pure). */
export function withFailures(e: LinkEvidence, edges: readonly (readonly [string, string])[], now: number, windowMs = EVIDENCE_WINDOW_MS): LinkEvidence {
  const out = new Map<string, Map<string, number>>();
  for (const [who, partners] of e.failedWith) {
    const kept = new Map([...partners].filter(([, at]) => now - at < windowMs));
    if (kept.size) out.set(who, kept);
  }
  const add = (a: string, b: string) => {
    if (a === b) return;
    const m = out.get(a) ?? new Map<string, number>();
    m.set(b, now);
    out.set(a, m);
  };
  for (const [a, b] of edges) { add(a, b); add(b, a); }
  return { failedWith: out };
}

/**
 * The ring member to evict for a set of failed edges (pure). `seen`: the evidence of earlier
 * rings and `identity` of a peer id (absent: this ring's edges only, peers as their ids).
 */
export function blameUnreachable(
  ring: readonly string[], edges: readonly (readonly [string, string])[], seen: LinkEvidence = noEvidence(), identity: (id: string) => string = (id) => id,
): string {
  const count = new Map<string, number>();
  for (const [a, b] of edges) {
    for (const id of new Set([a, b])) if (ring.includes(id)) count.set(id, (count.get(id) ?? 0) + 1);
  }
  const partners = (id: string): number => {
    const me = identity(id);
    const all = new Set(seen.failedWith.get(me)?.keys() ?? []);
    for (const [a, b] of edges) {
      if (a === id) all.add(identity(b));
      if (b === id) all.add(identity(a));
    }
    all.delete(me);
    return all.size;
  };
  let best: string | null = null;
  let bestScore: [number, number] = [0, 0];
  // Later members win ties: walk from the newest.
  for (let i = ring.length - 1; i >= 0; i--) {
    const id = ring[i]!;
    const c = count.get(id) ?? 0;
    // Only an end of this ring's failed edges is a suspect; the evidence weighs between them.
    if (c === 0) continue;
    const score: [number, number] = [partners(id), c];
    if (best === null || score[0] > bestScore[0] || (score[0] === bestScore[0] && score[1] > bestScore[1])) { best = id; bestScore = score; }
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

/**
 * Whether a ring failure of `kind` may be a consequence of formation rather than a fault of whom it blames (pure): a peer whose
 * formation fails (a link from its prev never opened) closes the link it had opened to next, and next, whose ring had formed,
 * reports that link closed, often before the peer's own connect-failed report arrives. So such reports in a generation's first
 * step wait UNREACHABLE_GRACE_MS with the connect-failed ones, and connect-failed reports, if any came, decide.
 */
export const mayBeFormationRace = (kind: RingErrorKind, firstStepOfGeneration: boolean): boolean => RACE_KINDS.has(kind) && firstStepOfGeneration;

/**
 * Whether a ring failure of `kind` blaming a still-connected peer (given a re-formed ring last at `lastAgain`) forms the ring again instead
 * of evicting it (pure).
 */
export function formAgain(kind: RingErrorKind, firstStepOfGeneration: boolean, lastAgain: number | undefined, now: number): boolean {
  return mayBeFormationRace(kind, firstStepOfGeneration) && (lastAgain === undefined || now - lastAgain >= FORM_AGAIN_WINDOW_MS);
}
