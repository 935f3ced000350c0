// The coordinator's side of low-communication rounds (job syncEvery H > 1): which ids each
// member computes in a round, and who gets what when the round runs again without a lost member.
//
// A round at step s covers the global steps s .. s + H' - 1 (H' = H, or fewer at the job's
// end). Each global step's ids are the sampler's (a function of (seed, step) only) and are split
// over the ring by measured speed, as in sync mode (step-plan.ts: consecutive slices, or by shard
// affinity when the job samples shard-locally); a member's slices of the H' steps are its
// share of the round. When a member is lost mid-round the SAME plan runs again in the next
// generation: survivors keep their slices (and reuse what they computed), the lost slices are
// left out and the mean is taken over the images that remain.
import type { RoundAssignment } from '../src/protocol/messages.ts';
import type { AffinityState } from './affinity.ts';
import { planStep, type JobSampler } from './step-plan.ts';

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
export function planRound(
  sampler: JobSampler, affinity: AffinityState, step: number, steps: number, ring: readonly string[], images: readonly number[],
): { plan: RoundPlan; affinity: AffinityState } {
  if (images.length !== ring.length) throw new RangeError(`planRound: ${images.length} shares for a ring of ${ring.length}`);
  const slices = new Map<string, number[][]>(ring.map((id) => [id, []]));
  const epochs: number[] = [];
  let state = affinity;
  for (let k = 0; k < steps; k++) {
    const r = planStep(sampler, state, step + k, ring, images);
    state = r.affinity;
    epochs.push(r.plan.epoch);
    r.plan.slices.forEach((s, rank) => slices.get(ring[rank]!)!.push(s));
  }
  return { plan: { step, steps, slices, epochs }, affinity: state };
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
