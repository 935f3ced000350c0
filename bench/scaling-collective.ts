// The all-reduce of the scaling simulator: its time on a topology, and how much of it hides
// behind backward when the gradient goes in buckets. Pure functions, seconds and bytes.
//
// Flat ring (today, src/comm): 2(N-1) steps (reduce-scatter, then all-gather), each moving a
// chunk of S/N bytes over every link at once:  T = 2(N-1) (alpha + S / (N bw)).
// Two-level (planned; a 2D torus): N = g x G peers in G groups of g. Reduce-scatter inside the
// groups (g-1 steps of S/g), all-reduce each 1/g piece across the groups (2(G-1) steps of
// S/(gG)), all-gather inside the groups (g-1 steps of S/g):
//   T = 2(g-1)(alpha + S/(g bw)) + 2(G-1)(alpha + S/(N bw))
// that is 2(g-1) + 2(G-1) = 4(sqrt N - 1) latency terms when g = G = sqrt N, and the same bytes
// per peer as the flat ring, 2(N-1)/N S. g is the divisor of N nearest sqrt N (a prime N has
// none but 1 and N, and falls back to the flat ring).
// Every step of a ring waits for its slowest link, so bw is the slowest peer's (min of up and
// down) and alpha the largest per-message latency (one-way delay + software per message).

export type Topology = 'ring' | 'two-level';

export interface LinkModel {
  /** Seconds per ring step independent of its size: one-way delay + software per message. */
  latencyS: number;
  /** Bytes/s of the slowest peer's link (min of up and down) while every link carries data. */
  bandwidthBytesPerS: number;
}

/** The group size g of the two-level all-reduce: the divisor of N nearest sqrt N, at most sqrt N. */
export function groupSize(peers: number): number {
  let g = Math.floor(Math.sqrt(peers));
  while (g > 1 && peers % g !== 0) g--;
  return g;
}

/** The ring steps of one all-reduce, each [count, bytes per step divided by S]. */
export function collectiveSteps(topology: Topology, peers: number): { count: number; bytesFraction: number }[] {
  if (!(Number.isInteger(peers) && peers >= 1)) throw new RangeError(`collectiveSteps: peers must be an integer >= 1, got ${peers}`);
  if (peers === 1) return [];
  const g = topology === 'two-level' ? groupSize(peers) : 1;
  if (g === 1) return [{ count: 2 * (peers - 1), bytesFraction: 1 / peers }];
  const groups = peers / g;
  return [{ count: 2 * (g - 1), bytesFraction: 1 / g }, { count: 2 * (groups - 1), bytesFraction: 1 / peers }];
}

/** Latency terms of one all-reduce: 2(N-1) for the ring, 2(g-1) + 2(N/g-1) for two levels. */
export function latencyTerms(topology: Topology, peers: number): number {
  return collectiveSteps(topology, peers).reduce((a, s) => a + s.count, 0);
}

/** Time of one all-reduce of `bytes`, split into its latency and bandwidth parts. */
export function allReduceTime(link: LinkModel, topology: Topology, peers: number, bytes: number): { latencyS: number; bandwidthS: number; totalS: number } {
  const steps = collectiveSteps(topology, peers);
  const latencyS = steps.reduce((a, s) => a + s.count * link.latencyS, 0);
  const bandwidthS = steps.reduce((a, s) => a + (s.count * s.bytesFraction * bytes) / link.bandwidthBytesPerS, 0);
  return { latencyS, bandwidthS, totalS: latencyS + bandwidthS };
}

/** One bucket of the gradient: its bytes, and the backward share after which all of it is ready. */
export interface Bucket { bytes: number; readyFraction: number }

/**
 * Buckets in reverse layer order (the order backward completes them), each closed once it holds
 * at least `bucketBytes` (the last one may be smaller). bucketBytes >= the gradient: one bucket,
 * ready when backward ends (readyFraction 1): today's single all-reduce. `lastBytes` > 0: the
 * last bucket (ready when backward ends) is cut once more, its first layers up to `lastBytes`
 * going last on their own, as src/nn/buckets.ts bucketPlan cuts tensors.
 */
export function bucketsOf(layers: readonly { bytes: number; readyFraction: number }[], bucketBytes: number, lastBytes = 0): Bucket[] {
  if (!(bucketBytes > 0)) throw new RangeError(`bucketsOf: bucketBytes must be > 0, got ${bucketBytes}`);
  const buckets: Bucket[] = [];
  let open: Bucket = { bytes: 0, readyFraction: 0 };
  let end = layers.length; // the open bucket holds layers [i, end)
  for (let i = layers.length - 1; i >= 0; i--) {
    const l = layers[i]!;
    open = { bytes: open.bytes + l.bytes, readyFraction: Math.max(open.readyFraction, l.readyFraction) };
    if (open.bytes >= bucketBytes && i > 0) { buckets.push(open); open = { bytes: 0, readyFraction: 0 }; end = i; }
  }
  // The bucket of layers [0, end): its first layers up to lastBytes become a bucket of their own.
  let k = 0, front = 0;
  if (lastBytes > 0 && open.bytes > lastBytes) while (k < end && front + layers[k]!.bytes <= lastBytes) front += layers[k++]!.bytes;
  if (k > 0 && k < end) {
    buckets.push({ bytes: open.bytes - front, readyFraction: Math.max(...layers.slice(k, end).map((l) => l.readyFraction)) });
    buckets.push({ bytes: front, readyFraction: 1 });
  } else if (open.bytes > 0) buckets.push(open);
  // The earliest layers complete when backward ends.
  if (buckets.length) buckets[buckets.length - 1]!.readyFraction = 1;
  return buckets;
}

/**
 * Communication still running after backward ends, when each bucket's all-reduce starts as soon
 * as it is ready (overlap) or all start after backward (no overlap); one bucket at a time, in
 * order. `backwardS` is the backward pass of the critical peer.
 */
export function exposedCommS(buckets: readonly Bucket[], bucketTimeS: (bytes: number) => number, backwardS: number, overlap: boolean): number {
  let end = 0;
  for (const b of buckets) {
    const ready = overlap ? b.readyFraction * backwardS : backwardS;
    end = Math.max(end, ready) + bucketTimeS(b.bytes);
  }
  return Math.max(0, end - backwardS);
}
