// Bucketed all-reduce: the flat gradient summed bucket by bucket, each bucket as soon as the
// caller says it is ready (backward produced it, src/train/overlap.ts), so communication runs
// while backward still computes.
//
// The fixed order (what makes every peer end with the same bits):
//   - bucket k of the plan is summed by its own collective, one after another in plan order
//     (k = 0, 1, ...), never two at once, on every peer;
//   - bucket k's collective carries ring step bucketStep(step, k) = step * MAX_BUCKETS + k in
//     every frame, so frames of different buckets (or steps) are never confused: a frame of a
//     later bucket that arrives early waits in the ring (ring.ts) until that bucket starts;
//   - inside a bucket, each element is summed in the order of the collective that runs it over
//     the bucket's subarray: allReduceSum's (chunk c of the bucket, cut by chunkRange(c,
//     bucket length, N), is summed x[c] + x[c+1] + ... + x[c-1], left to right in float32,
//     ranks mod N), or in the two-level order of hierarchical.ts when that is the collective.
// The result is therefore NOT bitwise the single allReduceSum of the whole buffer (the chunks
// differ), but it is the same on every peer, and each element is a float32 sum of the N inputs
// in one fixed order (exact to float rounding). Peers must cut the same buckets (the same
// bucketPlan of the same layout and size): a peer that does not is refused by the receiver's
// PLAN check (gradient lengths differ) and the step fails as with any mismatched collective.
//
// Step numbering: a ring's steps must increase, so a generation whose ring runs bucketed steps
// must number all its collectives this way (a plain allReduceSum of step s+1 on the same ring
// after a bucketed step s is refused). A job picks one mode; rings are formed per generation.

import { allReduceSum, type AllReduceOptions } from './allreduce.ts';
import { RingError } from './errors.ts';
import type { Ring } from './ring.ts';

/** Buckets per step: the stride of bucket ring steps (step < 2^24 on a flat ring, 2^23 on two levels). */
export const MAX_BUCKETS = 256;

/** The ring step of bucket `bucket` of training step `step`. */
export function bucketStep(step: number, bucket: number): number {
  return step * MAX_BUCKETS + bucket;
}

/** A contiguous range [start, end) of the flat gradient (src/nn/buckets.ts makes them). */
export interface BucketRange { readonly start: number; readonly end: number }

/** Sums `part` over the generation in place under ring step `ringStep`; rejects with a RingError. */
export type BucketCollective = (part: Float32Array, ringStep: number, onFirstFrame?: () => void) => Promise<unknown>;

export interface BucketAllReduceOptions extends Pick<AllReduceOptions, 'wire' | 'messageBytes' | 'maxRms' | 'onFirstFrame'> {
  /** The training step (bucket k runs as ring step bucketStep(step, k)). */
  step: number;
  /** The flat ring (allReduceSum per bucket), unless `collective` is given. */
  ring?: Ring;
  /** Another collective per bucket (e.g. the two-level one); `ring`, `wire`, `messageBytes` and `maxRms` are then unused. */
  collective?: BucketCollective;
  /**
   * Host work on a bucket whose sum has arrived (optimiser, checksum). Runs in bucket order,
   * while the next bucket's collective is in flight when that one was ready already.
   */
  onReduced?: (bucket: number) => void | Promise<void>;
}

/** Checks that the buckets tile [0, length) in some order (each element in exactly one bucket). */
export function checkBuckets(buckets: readonly BucketRange[], length: number): string {
  if (buckets.length === 0) return 'no buckets';
  if (buckets.length > MAX_BUCKETS) return `${buckets.length} buckets, at most ${MAX_BUCKETS} (use larger buckets)`;
  const sorted = [...buckets].sort((a, b) => a.start - b.start);
  let at = 0;
  for (const b of sorted) {
    if (!Number.isInteger(b.start) || !Number.isInteger(b.end) || b.end <= b.start) return `bucket [${b.start}, ${b.end}) is empty or not integral`;
    if (b.start !== at) return b.start < at ? `buckets overlap at ${b.start}` : `elements [${at}, ${b.start}) are in no bucket`;
    at = b.end;
  }
  return at === length ? '' : `the buckets end at ${at}, the gradient has ${length} elements`;
}

/**
 * Sums `grads` over every peer in place, bucket by bucket: bucket k (in array order) starts
 * once `ready(k)` resolved and bucket k-1 is summed here. `ready` is called once per bucket, for
 * all of them at the start (so work a caller chains onto it, e.g. keeping a copy of the bucket
 * before it is summed, runs even for buckets after a failure). Resolves to `grads` after the last
 * bucket's sum (and its onReduced) is done. On failure rejects with the RingError (or ready's
 * rejection): `grads` is then partly summed and the ring must be closed and the step redone,
 * as with allReduceSum.
 */
export async function allReduceBuckets(
  grads: Float32Array, buckets: readonly BucketRange[], ready: (bucket: number) => Promise<void>, opts: BucketAllReduceOptions,
): Promise<Float32Array> {
  const self = opts.ring?.selfId ?? '?';
  const why = checkBuckets(buckets, grads.length);
  if (why) throw new RingError('bad-input', self, `bucketed all-reduce of ${grads.length} floats: ${why}`);
  if (!Number.isInteger(opts.step) || opts.step < 0 || bucketStep(opts.step, MAX_BUCKETS - 1) > 0xffffffff) {
    throw new RingError('bad-input', self, `step ${opts.step} must be an integer in [0, 2^32 / ${MAX_BUCKETS})`);
  }
  const collective = opts.collective ?? flatCollective(opts);
  // Which buckets are on the host already (set by the promise callbacks, so possibly a tick late).
  const isReady = buckets.map(() => false);
  const readies = buckets.map((_, k) => {
    const p = ready(k);
    p.then(() => { isReady[k] = true; }, () => undefined);
    return p;
  });
  let pendingHost: number | null = null;
  const hostWork = async (): Promise<void> => {
    if (pendingHost === null || !opts.onReduced) return;
    const k = pendingHost;
    pendingHost = null;
    await opts.onReduced(k);
  };
  for (let k = 0; k < buckets.length; k++) {
    // A bucket not ready yet: do the previous one's host work while backward computes.
    if (!isReady[k]) await hostWork();
    await readies[k];
    const { start, end } = buckets[k]!;
    const running = collective(grads.subarray(start, end), bucketStep(opts.step, k), k === 0 ? opts.onFirstFrame : undefined);
    // Awaited below; this only keeps a failure from counting as unhandled while host work runs.
    running.catch(() => undefined);
    // Otherwise while this bucket's frames are in flight.
    await hostWork();
    await running;
    pendingHost = k;
  }
  await hostWork();
  return grads;
}

function flatCollective(opts: BucketAllReduceOptions): BucketCollective {
  const ring = opts.ring;
  if (!ring) throw new RingError('bad-input', '?', 'a bucketed all-reduce needs a ring or a collective');
  return (part, ringStep, onFirstFrame) => allReduceSum(part, {
    ring, step: ringStep, wire: opts.wire, messageBytes: opts.messageBytes, maxRms: opts.maxRms, onFirstFrame,
  });
}
