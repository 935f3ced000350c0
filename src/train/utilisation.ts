// Compute utilisation, as the decentralised training runs report it (INTELLECT-1 83-96%,
// Covenant-72B 94.5%): the share of the ring's wall time that went into computing gradients.
// A step of wall time W on a ring of n peers offers n W of peer time; peer i computed c_i of it:
//   per peer  c_i / W            the ring  sum c_i / (n W)
// What is left is the all-reduce not hidden behind backward, waiting for stragglers, loading
// data and the coordinator's own turns. Over a job: sum of compute over sum of n W, over the
// committed steps (an aborted step's time is lost but has no per-peer timings: not counted).

export interface UtilisationTally { computeMs: number; peerMs: number }

/** The ring's utilisation of one step; 0 for an empty ring or no wall time. */
export function stepUtilisation(timings: readonly { computeMs: number }[], wallMs: number): number {
  if (timings.length === 0 || !(wallMs > 0)) return 0;
  const c = timings.reduce((s, t) => s + Math.max(0, t.computeMs), 0);
  return Math.min(1, c / (timings.length * wallMs));
}

/** Each peer's share of the step's wall time spent computing, in ring order. */
export function peerUtilisation(timings: readonly { computeMs: number }[], wallMs: number): number[] {
  return timings.map((t) => (wallMs > 0 ? Math.min(1, Math.max(0, t.computeMs) / wallMs) : 0));
}

/** Adds one committed step to a job's tally. */
export function tallyStep(t: UtilisationTally, timings: readonly { computeMs: number }[], wallMs: number): UtilisationTally {
  if (timings.length === 0 || !(wallMs > 0)) return t;
  const c = timings.reduce((s, x) => s + Math.max(0, x.computeMs), 0);
  return { computeMs: t.computeMs + Math.min(c, timings.length * wallMs), peerMs: t.peerMs + timings.length * wallMs };
}

/** The tally's utilisation, null before any step. */
export function tallyUtilisation(t: UtilisationTally): number | null {
  return t.peerMs > 0 ? t.computeMs / t.peerMs : null;
}
