// Low-communication rounds on the coordinator: the plan of a round (which ids each member
// computes), the driver assigning rounds, re-running an aborted round with the survivors'
// same slices, joiners entering only at a round boundary, evaluations and checkpoints falling
// due when a round crosses their multiple, and the job settings.
import { describe, expect, it } from 'vitest';
import { JobError, parseJobConfig } from '../../coordinator/job.ts';
import { planImages, planRound, roundAssignment } from '../../coordinator/rounds.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';
import { N_TRAIN, driverHarness, imagesOf } from './driver-harness.ts';
import { shardLocator, stepSamples } from '../../src/train/sampler.ts';
import { emptyAffinity } from '../../coordinator/affinity.ts';
import { jobSampler } from '../../coordinator/step-plan.ts';

const harness = (config: Record<string, unknown>, evalIds: number[] = []) => {
  const h = driverHarness({ syncEvery: 4, ...config }, { evalIds });
  return { ...h, result: (id: string, a: StepAssignment) => h.result(id, a, 'c0ffee', 1000) };
};

describe('round plan', () => {
  it('gives each member its slice of every inner step: together exactly the steps\' ids', () => {
    const sampler = jobSampler({ seed: 3, globalBatch: 10, sampling: 'global', shuffleWindow: 16 }, N_TRAIN);
    const { plan } = planRound(sampler, emptyAffinity(), 8, 5, ['a', 'b', 'c'], [5, 3, 2]);
    expect(plan.steps).toBe(5);
    for (let k = 0; k < 5; k++) {
      const all = ['a', 'b', 'c'].flatMap((id) => plan.slices.get(id)![k]!);
      expect(all).toEqual(stepSamples(3, 8 + k, 10, N_TRAIN).ids);
      expect(plan.epochs[k]).toBe(stepSamples(3, 8 + k, 10, N_TRAIN).epoch);
    }
    expect(plan.slices.get('b')!.map((s) => s.length)).toEqual([3, 3, 3, 3, 3]);
    expect(planImages(plan, ['a', 'b', 'c'])).toBe(50);
    // Without b: its slices are left out and the mean is over the rest.
    expect(roundAssignment(plan, ['a', 'c'], 'c')!.images).toBe(35);
    // A member outside the plan computes nothing.
    expect(roundAssignment(plan, ['a', 'z'], 'z')!.ids).toEqual([[], [], [], [], []]);
    expect(roundAssignment(plan, ['z'], 'z')).toBeNull();
  });

  it('shard-locally: each inner step split by shard affinity, slices following the shares exactly', () => {
    const shards = Array.from({ length: 10 }, () => 50);
    const sampler = jobSampler({ seed: 3, globalBatch: 10, sampling: 'shard-local', shuffleWindow: 4 }, N_TRAIN, shards);
    const { plan, affinity } = planRound(sampler, emptyAffinity(), 8, 5, ['a', 'b', 'c'], [5, 3, 2]);
    const sampling = { kind: 'shard-local', shardSizes: shards, window: 4 } as const;
    for (let k = 0; k < 5; k++) {
      const all = ['a', 'b', 'c'].flatMap((id) => plan.slices.get(id)![k]!);
      expect(all.sort((x, y) => x - y)).toEqual(stepSamples(3, 8 + k, 10, N_TRAIN, sampling).ids.sort((x, y) => x - y));
    }
    expect(['a', 'b', 'c'].map((id) => plan.slices.get(id)!.map((s) => s.length))).toEqual([[5, 5, 5, 5, 5], [3, 3, 3, 3, 3], [2, 2, 2, 2, 2]]);
    // The state remembers the shards each member was given ids of.
    const shardOf = shardLocator(shards);
    expect(affinity.held.get('a')).toEqual(expect.arrayContaining([...new Set(plan.slices.get('a')!.at(-1)!.map(shardOf))]));
  });
});

describe('driver with rounds', () => {
  it('assigns rounds of H steps, commits them as H steps, and ends with a shorter round', () => {
    const h = harness({});
    let as = h.startRing(['a', 'b']);
    expect(as.map((a) => a.round?.ids.length)).toEqual([4, 4]);
    expect(as.every((a) => a.sampleIds.length === 0 && a.round!.images === 48)).toBe(true);
    as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
    expect(h.d.status().step).toBe(4);
    as = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(as[0]!.step).toBe(4);
    as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
    as = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(as[0]!.step).toBe(8);
    expect(as[0]!.round!.ids.length).toBe(2); // 10 steps: 4 + 4 + 2
    as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
    expect(h.d.status().step).toBe(10);
    const steps = h.records.filter((r) => r.type === 'step');
    expect(steps.map((r) => r.step)).toEqual([4, 8, 10]);
    expect(steps.map((r) => r.type === 'step' && r.traffic)).toEqual([
      { innerSteps: 4, bytesPerImage: 2000 / 48 }, { innerSteps: 4, bytesPerImage: 2000 / 48 }, { innerSteps: 2, bytesPerImage: 2000 / 24 },
    ]);
    h.d.stop();
  });

  it('a member lost mid-round: the same round for the survivors with their same slices, lost images left out, no joiner in between', () => {
    const h = harness({});
    const as = h.startRing(['a', 'b', 'c']);
    h.result('a', as[0]!);
    h.d.peerConnected('late', null); // waits: the round is in flight
    h.d.peerGone('b', 'killed');
    expect(h.has('late', 'load-state')).toBe(false);
    const again = ['a', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(again.map((a) => a.step)).toEqual([0, 0]);
    expect(again[0]!.generation).toBe(as[0]!.generation + 1);
    expect(again[0]!.round!.ids).toEqual(as[0]!.round!.ids);
    expect(again[1]!.round!.ids).toEqual(as[2]!.round!.ids);
    expect(again[0]!.round!.images).toBe(imagesOf(as[0]!) + imagesOf(as[2]!));
    // The joiner still waits (the round is not done), then enters at the round boundary.
    expect(h.has('late', 'load-state')).toBe(false);
    h.result('a', again[0]!);
    h.result('c', again[1]!);
    expect(h.d.status().step).toBe(4);
    expect(h.records.filter((r) => r.type === 'abort').map((r) => r.step)).toEqual([1]);
    expect(h.take('a', 'upload-checkpoint').step).toBe(4);
    h.d.stop();
  });

  it('a sync warm-up: single steps first, rounds after it', () => {
    const h = harness({ syncWarmup: 2 });
    let as = h.startRing(['a', 'b']);
    for (let s = 0; s < 2; s++) {
      expect(as.map((a) => [a.step, a.round === undefined, a.sampleIds.length])).toEqual([[s, true, 6], [s, true, 6]]);
      as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
      as = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    }
    expect(as.map((a) => [a.step, a.round?.ids.length])).toEqual([[2, 4], [2, 4]]);
    as.forEach((a, i) => h.result(['a', 'b'][i]!, a));
    expect(h.d.status().step).toBe(6);
    h.d.stop();
  });

  it('evaluates and checkpoints when a round crosses their multiple', () => {
    const h = harness({ evalEvery: 3, checkpointEvery: 6 }, [1, 2, 3]);
    let as = h.startRing(['a']);
    h.result('a', as[0]!); // step 4: crossed 3
    expect(h.take('a', 'evaluate').step).toBe(4);
    h.d.message('a', { type: 'eval-result', peerId: 'a', step: 4, counts: { samples: 3, top1: 1, top5: 3, lossSum: 2 } });
    as = [h.take('a', 'step-assignment')];
    expect(as[0]!.uploadCheckpoint).toBeUndefined(); // 4 crossed no multiple of 6
    h.result('a', as[0]!); // step 8: crossed 6
    expect(h.take('a', 'evaluate').step).toBe(8);
    h.d.message('a', { type: 'eval-result', peerId: 'a', step: 8, counts: { samples: 3, top1: 1, top5: 3, lossSum: 2 } });
    expect(h.take('a', 'step-assignment').uploadCheckpoint).toBe(true);
    h.d.stop();
  });

  it('job settings: syncEvery with its outer step, checked', () => {
    const base = { model: 'small-cnn', dataset: 'mnist', globalBatch: 12, steps: 10, optimizer: { kind: 'lars', lr: 1 } };
    expect(parseJobConfig(base, N_TRAIN).outer).toEqual({ syncEvery: 1, lr: 0.7, momentum: 0.9, warmup: 0 });
    expect(
      parseJobConfig({ ...base, syncEvery: 8, outerLr: 0.5, outerMomentum: 0.8 }, N_TRAIN).outer,
    ).toEqual({ syncEvery: 8, lr: 0.5, momentum: 0.8, warmup: 0 });
    const bad = (extra: Record<string, unknown>) => {
      try { parseJobConfig({ ...base, ...extra }, N_TRAIN); return ''; } catch (e) { expect(e).toBeInstanceOf(JobError); return (e as Error).message; }
    };
    expect(bad({ syncEvery: 0 })).toMatch(/syncEvery must be an integer in \[1, 1024\]/);
    expect(bad({ outerLr: 0.5 })).toMatch(/apply to rounds \(syncEvery > 1\)/);
    expect(bad({ syncWarmup: 5 })).toMatch(/apply to rounds/);
    expect(bad({ syncEvery: 4, outerMomentum: 1 })).toMatch(/outerMomentum/);
    expect(bad({ syncEvery: 1024, globalBatch: 100 })).toMatch(/syncEvery x globalBatch must be at most 65536/);
    // The inner momentum's carry: absent (each peer keeps its own, as job files from before), or rho in [0, 1).
    expect(
      parseJobConfig({ ...base, syncEvery: 8, outerLr: 1, outerMomentum: 0, momentumCarry: 0.75 }, N_TRAIN).outer,
    ).toEqual({ syncEvery: 8, lr: 1, momentum: 0, warmup: 0, carry: 0.75 });
    expect('carry' in parseJobConfig({ ...base, syncEvery: 8 }, N_TRAIN).outer).toBe(false);
    expect(bad({ momentumCarry: 0.75 })).toMatch(/momentumCarry apply to rounds \(syncEvery > 1\)/);
    expect(bad({ syncEvery: 8, momentumCarry: 1 })).toMatch(/momentumCarry/);
    expect(bad({ syncEvery: 8, momentumCarry: -0.1 })).toMatch(/momentumCarry/);
    expect(bad({ syncEvery: 8, momentumCarry: '0.5' })).toMatch(/momentumCarry/);
  });
});
