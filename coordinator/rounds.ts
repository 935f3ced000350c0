// The coordinator's side of low-communication rounds (job syncEvery H > 1): which ids each
// member computes in a round, and who gets what when the round runs again without a lost member.
//
// A round at step s covers the global steps s .. s + H' - 1 (H' = H, or fewer at the job's
// end). Each global step's ids are the sampler's (a function of (seed, step) only) and are split
// over the ring by measured speed, as in sync mode; a member's slices of the H' steps are its
// share of the round. When a member is lost mid-round the SAME plan runs again in the next
// generation: survivors keep their slices (and reuse what they computed), the lost slices are
// left out and the mean is taken over the images that remain.
import type { RoundAssignment } from '../src/client/protocol.ts';
import { sliceIds, stepSamples } from '../src/train/sampler.ts';

export interface RoundPlan {
  /** The round's first step. */
  step: number;
  /** H': the round's inner steps. */
  steps: number;
  /** Per member: its slice of each inner step, and the inner steps' epochs. */
  slices: Map<string, number[][]>;
  epochs: number[];
}

/** Plans the round at `step` of `steps` inner steps for `ring`; `images[rank]` is each member's share of B. */
export function planRound(seed: number, step: number, steps: number, globalBatch: number, trainSamples: number, ring: readonly string[], images: readonly number[]): RoundPlan {
  if (images.length !== ring.length) throw new RangeError(`planRound: ${images.length} shares for a ring of ${ring.length}`);
  const slices = new Map<string, number[][]>(ring.map((id) => [id, []]));
  const epochs: number[] = [];
  for (let k = 0; k < steps; k++) {
    const { epoch, ids } = stepSamples(seed, step + k, globalBatch, trainSamples);
    epochs.push(epoch);
    sliceIds(ids, images).forEach((s, rank) => slices.get(ring[rank]!)!.push(s));
  }
  return { step, steps, slices, epochs };
}

/** Images of `ring`'s members in the plan (a member outside it, a joiner, computes none). */
export function planImages(plan: RoundPlan, ring: readonly string[]): number {
  let n = 0;
  for (const id of ring) for (const s of plan.slices.get(id) ?? []) n += s.length;
  return n;
}

/** The round message part for member `id` of `ring` (null when the ring has no images at all). */
export function roundAssignment(plan: RoundPlan, ring: readonly string[], id: string): RoundAssignment | null {
  const images = planImages(plan, ring);
  if (images === 0) return null;
  const ids = plan.slices.get(id) ?? Array.from({ length: plan.steps }, () => []);
  return { ids, epochs: plan.epochs, images };
}
