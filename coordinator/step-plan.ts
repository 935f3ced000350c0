// Which ids of a step each member of the ring computes. The ids are the sampler's (a function
// of the seed, the step and the job's sampling only: src/train/sampler.ts); the split follows
// the members' measured speed exactly (`images`, from splitBatch). With global sampling the
// ids are cut into consecutive slices in rank order (sliceIds); shard-locally each member gets
// ids of the shards it already holds (affinity.ts), so it downloads about one shard in W per
// block instead of one per image.
import { GLOBAL_SAMPLING, checkShardLayout, shardLocator, sliceIds, stepSamples, type Sampling } from '../src/train/sampler.ts';
import { affinityCapacity, type AffinityState } from './affinity.ts';
import { assignGroupsByAffinity } from './bn-groups.ts';
import type { JobConfig } from './job.ts';

/** What a job's steps are drawn from: everything the ids of a step depend on. */
export interface JobSampler {
  seed: number;
  globalBatch: number;
  trainSamples: number;
  sampling: Sampling;
  /** Shard-local only: id -> shard of the train split. */
  shardOf: ((id: number) => number) | null;
  /** Images per BN group, handed out whole (bn-groups.ts); 1: any split. */
  bnGroup: number;
}

export class SamplingError extends Error {
  readonly kind = 'bad-sampling';
  constructor(message: string) {
    super(message);
    this.name = 'SamplingError';
  }
}

/** The sampler of `job` over a train split of `trainSamples` ids in shards of `trainShards` samples each. */
export function jobSampler(
  job: Pick<JobConfig, 'seed' | 'globalBatch' | 'sampling' | 'shuffleWindow' | 'bnGroup'>, trainSamples: number, trainShards?: readonly number[],
): JobSampler {
  const base = { seed: job.seed, globalBatch: job.globalBatch, trainSamples, bnGroup: job.bnGroup ?? 1 };
  if (job.sampling === 'global') return { ...base, sampling: GLOBAL_SAMPLING, shardOf: null };
  if (!trainShards) {
    throw new SamplingError('the job samples shard-locally but the coordinator was given no shard sizes of the train split: '
      + 'pass trainShards (the manifest\'s splits.train.shards[k].samples)');
  }
  try {
    checkShardLayout(trainShards, job.shuffleWindow, trainSamples);
  } catch (e) {
    if (e instanceof RangeError) throw new SamplingError(`${e.message} (check the data folder's manifest.json)`);
    throw e;
  }
  return { ...base, sampling: { kind: 'shard-local', shardSizes: trainShards, window: job.shuffleWindow }, shardOf: shardLocator(trainShards) };
}

/** One step's ids split over a ring: slices[rank]. */
export interface StepPlan { step: number; epoch: number; slices: number[][] }

/** Plans `step` for `ring` with `images[rank]` images each; returns the affinity state after it. */
export function planStep(
  s: JobSampler, affinity: AffinityState, step: number, ring: readonly string[], images: readonly number[],
): { plan: StepPlan; affinity: AffinityState } {
  const { epoch, ids } = stepSamples(s.seed, step, s.globalBatch, s.trainSamples, s.sampling);
  const cut = images.findIndex((n) => n % s.bnGroup !== 0);
  if (cut >= 0) throw new RangeError(`planStep: rank ${cut}'s ${images[cut]} images are not whole BN groups of ${s.bnGroup} (a bug: split with splitGroups)`);
  // Global: consecutive ids of the sampler's order, so whole groups of it (bn-groups.ts).
  if (s.sampling.kind === 'global' || !s.shardOf) return { plan: { step, epoch, slices: sliceIds(ids, images) }, affinity };
  const capacity = affinityCapacity(s.sampling.window, ring.length);
  const r = assignGroupsByAffinity(affinity, { ids, shardOf: s.shardOf, ring, targets: images, capacity }, s.bnGroup);
  return { plan: { step, epoch, slices: r.slices }, affinity: r.state };
}

/**
 * The split to use for the next step of `ring`: `fresh` (splitBatch of the measured speeds),
 * unless the previous split of the same ring is within `tolerance` of it for every member
 * (default a tenth of its share, at least one image): then the previous one, so that measured
 * speeds jittering by a few images do not move ids between members every step. Shard-locally
 * each such move can cost a shard download; a lasting change of speed still moves the split.
 */
export function steadySplit(
  previous: { ring: readonly string[]; images: readonly number[] } | null, ring: readonly string[], fresh: readonly number[], tolerance = 0.1,
): number[] {
  if (!previous || previous.ring.length !== ring.length || previous.ring.some((id, i) => id !== ring[i])) return [...fresh];
  const total = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
  if (total(previous.images) !== total(fresh)) return [...fresh];
  const close = fresh.every((n, i) => Math.abs(n - previous.images[i]!) <= Math.max(1, Math.round(tolerance * previous.images[i]!)));
  return close ? [...previous.images] : [...fresh];
}
