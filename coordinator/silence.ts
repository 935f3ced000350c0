// When the coordinator gives up on a silent peer. A peer's session sends a heartbeat every
// heartbeatMs (2 s by default) from a timer, so a healthy peer whose event loop runs is never
// silent for long: a host that hangs or whose link is cut is noticed after `silentMs` (a few
// heartbeats). Compute can block a peer's event loop (the wasm engine runs a slice's forward and
// backward synchronously; WebGPU work is asynchronous and leaves it free), so a peer gets more:
//   - 4x the longest gap between two of its messages seen so far;
//   - 2x the longest compute (plus data wait) it has reported for a step: a block inside a
//     step cannot last longer than the step's work;
//   - `firstSilentMs` while it does work whose length nothing has measured yet: loading a
//     checkpoint, its first step as a member, an evaluation, a checkpoint upload.
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
}

/** How long `p` may stay silent before it is dropped. */
export function silenceLimitMs(p: SilenceView, l: SilenceLimits): number {
  let limit = Math.max(l.silentMs, 4 * p.maxGap);
  if (p.maxWorkMs !== null) limit = Math.max(limit, 2 * p.maxWorkMs);
  if (p.unmeasured) limit = Math.max(limit, l.firstSilentMs);
  return limit;
}
