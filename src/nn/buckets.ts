// Gradient buckets: the flat gradient buffer cut into contiguous ranges at tensor boundaries,
// from the END of the buffer backwards, for an all-reduce that starts while backward still runs
// (as PyTorch DDP does). Parameters lie in node order (layout.ts) and backward walks the nodes
// in reverse, so the last tensors' gradients are final first: bucket 0 is the tail of the
// buffer, ready after the fewest backward nodes; the last bucket starts at offset 0.
//
// A bucket holds whole tensors and the padding after them, never part of a tensor, so LARS
// (per tensor) can run on a bucket as soon as its sum has arrived. A tensor larger than the
// bucket size gets a bucket of its own. The plan is a pure function of (layout, maxBytes):
// every peer of a ring that holds the same model and setting cuts the same buckets.
import { VtError } from '../errors.ts';
import type { Layout, ParamTensor } from './layout.ts';

/**
 * 25 MiB, PyTorch DDP's default cap: every bucket is a collective of its own and pays the ring's
 * message latencies again (2(N-1), or ~4(sqrt N - 1) in two levels), so at 64 peers ResNet-50's
 * 102 MB in 4 MiB buckets (25 collectives) spent more in latency than the overlap hid; in 25 MiB
 * buckets it is 4-5 collectives, and small models (under 25 MiB) all-reduce in one.
 */
export const DEFAULT_BUCKET_BYTES = 25 << 20;

/**
 * 1 MiB: the cap of the bucket all-reduced LAST, the first layers' (offset 0). Its all-reduce
 * starts only when backward ends, so all of it is exposed; in 25 MiB buckets ResNet-50's last
 * bucket is ~24 MB (half the step's exposed communication at 64 peers). The first layers hold
 * few parameters but much of backward's work (ResNet-50's first 1 MB of parameters: ~18% of its
 * backward FLOPs), so a small last bucket lets everything else finish behind them. The scaling
 * bench's simulator chose it (bench/scaling-sim.ts, the same plan): 0.79 -> 0.83 predicted at
 * 64 peers for ResNet-50 224 over 1 Gb/s; it costs one collective's latency where a ring is
 * bandwidth-bound. 0 (the job's lastBucketBytes): no such cut.
 */
export const DEFAULT_LAST_BUCKET_BYTES = 1 << 20;

export interface GradBucket {
  /** Position in the plan: the order in which buckets are ready and all-reduced. */
  index: number;
  /** [start, end) in the flat gradient (elements). */
  start: number;
  end: number;
  /** Backward must have run down to this node (Model.beginBackward().runTo(node)) for the range to be final. */
  node: number;
  /** The parameter tensors inside [start, end), in layout order. */
  params: ParamTensor[];
}

/**
 * The buckets of a layout, tail first, each at most `maxBytes` unless one tensor is larger; then
 * the last bucket (offset 0, all-reduced after backward ends) is cut once more where it holds
 * more than `lastBytes`: its first tensors up to `lastBytes` go last, on their own (0: no cut).
 */
export function bucketPlan(layout: Layout, maxBytes = DEFAULT_BUCKET_BYTES, lastBytes = 0): GradBucket[] {
  if (!Number.isFinite(maxBytes) || maxBytes < 4) throw new VtError('bad-shape', `bucket size must be at least 4 bytes, got ${maxBytes}`);
  if (!(Number.isInteger(lastBytes) && lastBytes >= 0)) throw new VtError('bad-shape', `last bucket size must be an integer >= 0, got ${lastBytes}`);
  const maxFloats = Math.floor(maxBytes / 4);
  // No parameters: one bucket (the zero padding), final once backward is done.
  if (layout.params.length === 0) return [{ index: 0, start: 0, end: layout.paramFloats, node: 1, params: [] }];
  const buckets: GradBucket[] = [];
  let end = layout.paramFloats;
  let members: ParamTensor[] = [];
  const close = (start: number): void => {
    buckets.push({ index: buckets.length, start, end, node: Math.min(...members.map((p) => p.node)), params: members.reverse() });
    end = start;
    members = [];
  };
  for (let k = layout.params.length - 1; k >= 0; k--) {
    const p = layout.params[k]!;
    // Adding p would make the bucket [p.offset, end) too large: close it at the last tensor's start.
    if (members.length > 0 && end - p.offset > maxFloats) close(members[members.length - 1]!.offset);
    members.push(p);
  }
  close(0);
  return cutLast(buckets, Math.floor(lastBytes / 4));
}

/** The plan with its last bucket split at the last tensor boundary within `lastFloats` (unchanged when that bucket fits, or its first tensor does not). */
function cutLast(buckets: GradBucket[], lastFloats: number): GradBucket[] {
  const last = buckets[buckets.length - 1]!;
  if (lastFloats === 0 || last.end - last.start <= lastFloats) return buckets;
  const k = last.params.findIndex((p) => p.offset + p.length > lastFloats);
  if (k <= 0) return buckets;
  const cut = last.params[k]!.offset;
  const rest = last.params.slice(k), front = last.params.slice(0, k);
  const nodeOf = (ps: readonly ParamTensor[]) => Math.min(...ps.map((p) => p.node));
  return [
    ...buckets.slice(0, -1),
    { index: last.index, start: cut, end: last.end, node: nodeOf(rest), params: rest },
    { index: last.index + 1, start: 0, end: cut, node: nodeOf(front), params: front },
  ];
}

/** The parameter tensors of the given buckets (for an optimiser step over part of the buffer). */
export function bucketParams(buckets: readonly GradBucket[]): ParamTensor[] {
  return buckets.flatMap((b) => b.params);
}
