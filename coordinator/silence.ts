// When the coordinator gives up on a silent peer. A peer's session sends a heartbeat every
// heartbeatMs (2 s by default) from a timer, so a healthy peer whose event loop runs is never
// silent for long: a host that hangs or whose link is cut is noticed after `silentMs` (a few
// heartbeats). Compute can block a peer's event loop (the wasm engine runs a slice's forward and
// backward synchronously; WebGPU work is asynchronous and leaves it free), so a peer gets more:
//   - 4x the longest gap between two of its messages seen so far;
//   - 2x the longest compute (plus data wait) it has reported for a step: a block inside a
//     step cannot last longer than the step's work;
//   - `firstSilentMs` while it does work whose length nothing has measured yet: loading a
//     checkpoint, its first step as a member, an evaluation, a checkpoint upload;
//   - in that time also 2x the work its own probe predicts (JoinRequest.probeMsPerImage times its
//     slice: src/nn/fit.ts times a forward + backward before it joins), at most
//     MOST_PROBED_FIRST x firstSilentMs: a big slice on a slow engine (ResNet-50 on a software
//     GPU, whose GL backend runs each submit on the calling thread) blocks for longer than
//     firstSilentMs, and without it is evicted in every first step it tries. The claim is the
//     peer's own, so it is bounded: a peer that lies about it holds a ring that long once.
// The evicted peer's survivors are preempted by the next generation's assignment, so a dead
// ring neighbour costs about this limit, not the ring's own (much longer) deadAfterMs.

export interface SilenceLimits {
  /** Silence allowed to a peer whose event loop runs (heartbeats flow). */
  silentMs: number;
  /** Silence allowed during work not measured yet (first step, loading, evaluation, upload). */
  firstSilentMs: number;
}

export interface SilenceView {
  /** The longest time between two of its messages so far. */
  maxGap: number;
  /** The longest computeMs + dataMs it reported for a step (null: no step reported yet). */
  maxWorkMs: number | null;
  /** Doing work whose length is unmeasured (loading, evaluating, uploading, a first step). */
  unmeasured: boolean;
  /** The work its own probe predicts for what it computes now (null or absent: none said). */
  probedWorkMs?: number | null;
}

/** A peer's own prediction raises its unmeasured silence to at most this many firstSilentMs. */
export const MOST_PROBED_FIRST = 10;

/** How long `p` may stay silent before it is dropped. */
export function silenceLimitMs(p: SilenceView, l: SilenceLimits): number {
  let limit = Math.max(l.silentMs, 4 * p.maxGap);
  if (p.maxWorkMs !== null) limit = Math.max(limit, 2 * p.maxWorkMs);
  if (p.unmeasured) limit = Math.max(limit, l.firstSilentMs, Math.min(2 * (p.probedWorkMs ?? 0), MOST_PROBED_FIRST * l.firstSilentMs));
  return limit;
}
