// Ghost batch norm's groups (JobConfig.bnGroup, src/nn/model.ts): BN normalises each run of G
// images of a step on its own, so the groups must be the same whoever computes them. They are a
// pure function of the step's ids (themselves of the seed and the step): G consecutive ids of
// the sampler's order, or shard-locally of the ids ordered by shard (groupOrder), so that a group
// mostly lies in one shard. Every split hands out whole groups, in that order: a slice is a run of
// groups, a peer cuts it into micro-batches of whole groups, and the step's gradient is the same
// (up to float summation order) on N peers as on one.
import { assignByAffinity, type AffinityInput, type AffinityResult, type AffinityState } from './affinity.ts';
import { splitBatch } from './job.ts';

/** Images per rank by measured speed (splitBatch), in whole groups of `group` (1: any split). */
export function splitGroups(images: number, group: number, speeds: readonly number[]): number[] {
  if (group <= 1) return splitBatch(images, speeds);
  if (images % group !== 0) throw new RangeError(`splitGroups: ${images} images are not whole BN groups of ${group}`);
  return splitBatch(images / group, speeds).map((n) => n * group);
}

/** The step's ids with each shard's ids together (shards in order of first appearance, ids in sampler order within). */
export function groupOrder(ids: readonly number[], shardOf: (id: number) => number): number[] {
  const byShard = new Map<number, number[]>();
  for (const id of ids) {
    const k = shardOf(id);
    const g = byShard.get(k);
    if (g) g.push(id);
    else byShard.set(k, [id]);
  }
  return [...byShard.values()].flat();
}

/**
 * Shard affinity (affinity.ts) over whole groups: each group of `group` ids in groupOrder is one
 * unit, held by the shard of its first id; targets are in images (multiples of `group`). A
 * slice is its groups in order.
 */
export function assignGroupsByAffinity(state: AffinityState, a: AffinityInput, group: number): AffinityResult {
  if (group <= 1) return assignByAffinity(state, a);
  if (a.ids.length % group !== 0) throw new RangeError(`assignGroupsByAffinity: ${a.ids.length} ids are not whole BN groups of ${group}`);
  const bad = a.targets.findIndex((t) => t % group !== 0);
  if (bad >= 0) throw new RangeError(`assignGroupsByAffinity: the target of rank ${bad} (${a.targets[bad]}) is not whole BN groups of ${group}`);
  const ordered = groupOrder(a.ids, a.shardOf);
  const groups = ordered.length / group;
  const shardOfGroup = Array.from({ length: groups }, (_, t) => a.shardOf(ordered[t * group]!));
  const r = assignByAffinity(state, {
    ids: Array.from({ length: groups }, (_, t) => t), shardOf: (t) => shardOfGroup[t]!,
    ring: a.ring, targets: a.targets.map((t) => t / group), capacity: a.capacity,
  });
  return { ...r, slices: r.slices.map((ts) => ts.flatMap((t) => ordered.slice(t * group, (t + 1) * group))) };
}
