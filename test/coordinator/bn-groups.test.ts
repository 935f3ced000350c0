// Ghost batch norm's groups (coordinator/bn-groups.ts): every split of a step hands out whole
// groups, the groups are a function of the step alone (one peer or many, any speeds), and a
// re-run shares lost slices out in whole groups.
import { describe, expect, it } from 'vitest';
import { assignGroupsByAffinity, groupOrder, splitGroups } from '../../coordinator/bn-groups.ts';
import { emptyAffinity } from '../../coordinator/affinity.ts';
import { JobError, parseJobConfig } from '../../coordinator/job.ts';
import { IMAGENET_RECIPES, defaultBnGroup, recipeBnGroup } from '../../coordinator/recipes.ts';
import { keptSlices, planRerun } from '../../coordinator/slice-rerun.ts';
import { jobSampler, planStep } from '../../coordinator/step-plan.ts';

/** The groups of a slice: runs of G ids, each as a sorted key. */
const groupsOf = (slice: readonly number[], G: number): string[] => {
  expect(slice.length % G).toBe(0);
  return Array.from({ length: slice.length / G }, (_, k) => [...slice.slice(k * G, (k + 1) * G)].sort((a, b) => a - b).join(','));
};

describe('BN groups', () => {
  it('splitGroups splits by speed in whole groups, and any way without groups', () => {
    expect(splitGroups(64, 8, [1, 1, 2])).toEqual([16, 16, 32]);
    expect(splitGroups(64, 8, [3, 1, 1]).every((n) => n % 8 === 0)).toBe(true);
    expect(splitGroups(10, 1, [1, 1, 1]).reduce((a, b) => a + b, 0)).toBe(10);
    expect(() => splitGroups(60, 8, [1, 1])).toThrow(/not whole BN groups of 8/);
  });

  it('groupOrder keeps each shard together, shards in order of first appearance', () => {
    const shardOf = (id: number) => Math.floor(id / 10);
    expect(groupOrder([31, 5, 33, 12, 7, 35], shardOf)).toEqual([31, 33, 35, 5, 7, 12]);
  });

  for (const sampling of ['global', 'shard-local'] as const) {
    it(`${sampling}: slices are whole groups, and the groups are those one peer gets, whatever the ring and speeds`, () => {
      const G = 4;
      const shards = Array.from({ length: 16 }, () => 25);
      const sampler = jobSampler({ seed: 3, globalBatch: 64, sampling, shuffleWindow: 4, bnGroup: G }, 400, shards);
      for (let step = 0; step < 8; step++) {
        const one = planStep(sampler, emptyAffinity(), step, ['solo'], [64]).plan;
        const reference = groupsOf(one.slices[0]!, G).sort();
        for (const speeds of [[1, 1, 1], [5, 1, 2], [1, 9, 1, 3]]) {
          const ring = speeds.map((_, i) => `p${i}`);
          const plan = planStep(sampler, emptyAffinity(), step, ring, splitGroups(64, G, speeds)).plan;
          expect(plan.slices.flatMap((s) => groupsOf(s, G)).sort()).toEqual(reference);
        }
      }
    });
  }

  it('shard-locally a group mostly lies in one shard, and affinity keeps whole groups', () => {
    const shardOf = (id: number) => Math.floor(id / 8);
    const ids = Array.from({ length: 32 }, (_, i) => (i * 13) % 64);
    const r = assignGroupsByAffinity(emptyAffinity(), { ids, shardOf, ring: ['a', 'b'], targets: [16, 16], capacity: 8 }, 4);
    for (const s of r.slices) for (let k = 0; k < s.length; k += 4) expect(new Set(s.slice(k, k + 4).map(shardOf)).size).toBeLessThanOrEqual(2);
    expect(r.slices.flat().sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
    expect(() => assignGroupsByAffinity(emptyAffinity(), { ids, shardOf, ring: ['a', 'b'], targets: [14, 18], capacity: 8 }, 4)).toThrow(/rank 0 \(14\)/);
  });

  it('a re-run shares a lost slice out in whole groups', () => {
    const slices = [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [20, 21, 22, 23]];
    const kept = keptSlices(5, 0, 2, ['a', 'b', 'c'], slices);
    const plan = planRerun(kept, ['a', 'c'], [1, 1], 4)!;
    expect(plan.extra).toEqual([8, 4]);
    expect(plan.slices.map((s) => groupsOf(s, 4))).toEqual([
      [...groupsOf(slices[0]!, 4), '8,9,10,11', '12,13,14,15'],
      [...groupsOf(slices[2]!, 4), '16,17,18,19'],
    ]);
  });

  it("npm start's default group: the recipe's where it divides the batch and every first peer gets one", () => {
    expect(defaultBnGroup(32, 32768)).toBe(32);
    expect(defaultBnGroup(32, 32768, 64)).toBe(32);
    expect(defaultBnGroup(32, 48)).toBe(16);
    expect(defaultBnGroup(32, 4, 2)).toBe(2);
    expect(defaultBnGroup(32, 6, 4)).toBe(1);
    expect(recipeBnGroup(IMAGENET_RECIPES.resnet50, 224)).toBe(4);
    expect(recipeBnGroup(IMAGENET_RECIPES.resnet50, 64)).toBe(8);
    expect(recipeBnGroup(IMAGENET_RECIPES.resnet50, 96)).toBe(4);
    expect(recipeBnGroup(IMAGENET_RECIPES.alexnet, 64)).toBeUndefined();
  });

  it('a job checks bnGroup against its batch and against work stealing', () => {
    const base = { model: 'resnet20', dataset: 'cifar10', globalBatch: 64, steps: 10, optimizer: { kind: 'sgd', lr: 0.1 } };
    const job = parseJobConfig({ ...base, bnGroup: 16 }, 50_000);
    expect(job.bnGroup).toBe(16);
    expect(job.steal).toBeUndefined(); // stealing "auto" is off with groups
    expect(() => parseJobConfig({ ...base, bnGroup: 24 }, 50_000)).toThrow(/whole BN groups of bnGroup 24/);
    expect(() => parseJobConfig({ ...base, bnGroup: 16, stealFraction: 0.5 }, 50_000)).toThrow(JobError);
    expect(parseJobConfig(base, 50_000).bnGroup).toBeUndefined();
  });
});
