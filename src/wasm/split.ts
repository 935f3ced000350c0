// How the wasm engine's ops split work between threads (src/wasm/threads.ts runs the parts).
import type { PartCtx } from './tensor.ts';

/** Below this many multiply-adds an op runs on one thread (a dispatch costs tens of µs). */
export const MIN_SPLIT_MACS = 1 << 18;

/** Part t of [0, total) cut into `parts` contiguous ranges whose inner bounds are multiples of `align`. */
export function splitRange(total: number, parts: number, t: number, align = 1): [number, number] {
  const blocks = Math.ceil(total / align);
  const at = (i: number) => Math.min(total, Math.floor((blocks * i) / parts) * align);
  return [at(t), at(t + 1)];
}

/** The partial sums of one round of groups stay under this many bytes (rounds of `threads` groups at least). */
const PARTIAL_BYTES = 32 * 2 ** 20;

/** Groups per round when each group's partial sum is `floats` floats: a multiple of `threads`, at least `threads`. */
export function groupsPerRound(groups: number, threads: number, floats: number): number {
  return Math.min(groups, Math.max(threads, Math.floor(PARTIAL_BYTES / (floats * 4) / threads) * threads));
}

/**
 * Part `t` of `parts` (inside cx.run) of a sum over groups, out (+)= r_0, += r_1, ... in group order, as one thread
 * adds them: in rounds of groupsPerRound groups, each part computes the sums of its share of the round's groups
 * (`compute(q, dst)` writes group q's `floats` floats at dst, a slot of `partials`), then, after a barrier, adds the
 * round's sums in group order into its own range of `out` (group 0 is copied there unless `onto`). Every r_q and every
 * addition is the same whatever the thread count, so the bits are too.
 */
export function sumGroupsInOrder(pc: PartCtx, t: number, parts: number, groups: number, floats: number, partials: number, out: number,
  onto: boolean, compute: (q: number, dst: number) => void): void {
  const perRound = groupsPerRound(groups, parts, floats);
  const [e0, e1] = splitRange(floats, parts, t, 4);
  for (let q0 = 0; q0 < groups; q0 += perRound) {
    const q1 = Math.min(groups, q0 + perRound);
    if (q0 > 0) pc.barrier(); // the previous round's partial sums are all added
    const [a0, a1] = splitRange(q1 - q0, parts, t);
    for (let q = q0 + a0; q < q0 + a1; q++) compute(q, partials + (q - q0) * floats * 4);
    pc.barrier(); // every partial sum of the round is there
    if (e1 <= e0) continue;
    const d = out + e0 * 4;
    for (let q = q0; q < q1; q++) {
      const r = partials + ((q - q0) * floats + e0) * 4;
      if (q === 0 && !onto) pc.k.copyRows(r, 0, d, 0, 1, e1 - e0);
      else pc.k.add(d, r, d, e1 - e0);
    }
  }
}
