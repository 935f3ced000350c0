// Job config parsing (every problem named), membership generations and the batch split.
import { describe, expect, it } from 'vitest';
import { DATASETS } from '../../coordinator/data/cli.ts';
import {
  DEFAULT_WIRE, JOB_DATASETS, JobError, atStepBoundary, nextGeneration, parseJobConfig, publicJobInfo, requestJoin, requestLeave, splitBatch, startMembership,
  wireField,
} from '../../coordinator/job.ts';
import { WIRE_FORMATS } from '../../src/protocol/frames.ts';
import { jobWire } from '../../src/client/sync-step.ts';
import { makeRng } from '../../src/rng.ts';

const BASE = { model: 'small-cnn', dataset: 'cifar10', globalBatch: 1024, optimizer: { kind: 'lars', lr: 8, warmupSteps: 5 }, epochs: 2 };

function problems(input: unknown, trainSamples = 50_000): string {
  try {
    parseJobConfig(input, trainSamples);
  } catch (e) {
    if (e instanceof JobError) return e.message;
    throw e;
  }
  throw new Error('expected a JobError');
}

describe('job config', () => {
  it('fills defaults and turns epochs into the schedule length', () => {
    const job = parseJobConfig(BASE, 50_000);
    expect(job).toMatchObject({
      name: 'job', model: 'small-cnn', dataset: 'cifar10', globalBatch: 1024, stepsPerEpoch: 48, totalSteps: 96, evalEvery: 48, checkpointEvery: 50,
      keepCheckpoints: 3, access: { kind: 'public' }, seed: 0,
    });
    expect(job.optimizer).toMatchObject({ kind: 'lars', lr: 8, warmupSteps: 5, totalSteps: 96, momentum: 0.9, eta: 0.001 });
    expect(job.labelSmoothing).toBe(0);
    expect(parseJobConfig({ ...BASE, labelSmoothing: 0.1 }, 50_000).labelSmoothing).toBe(0.1);
  });

  it('takes steps, a private token and explicit intervals', () => {
    const job = parseJobConfig({
      ...BASE, epochs: undefined, steps: 300, access: 'private', joinToken: 'a-long-lab-token-123', checkpointEvery: 10, keepCheckpoints: 5, evalEvery: 0,
      seed: 9, name: 'lab',
    }, 50_000);
    expect(job).toMatchObject({
      totalSteps: 300, access: { kind: 'private', joinToken: 'a-long-lab-token-123' }, checkpointEvery: 10, keepCheckpoints: 5, evalEvery: 0, seed: 9,
      name: 'lab',
    });
    expect(job.optimizer.totalSteps).toBe(300);
    expect(JSON.stringify(publicJobInfo(job))).not.toContain('a-long-lab-token-123');
    expect(publicJobInfo(job).access).toBe('private');
  });

  it('lists every problem with what to do', () => {
    const text = problems({
      model: 'vgg', dataset: 'cifar100', globalBatch: 0, optimizer: { kind: 'adam', lr: 1 }, steps: 3, epochs: 1, access: 'private', extra: 1,
    });
    for (const p of [
      'model must be one of small-cnn', 'dataset must be one of cifar10', 'globalBatch must be', 'give exactly one of steps or epochs', 'optimizer: ',
      "kind must be one of 'lars', 'sgd'", 'joinToken must be', 'unknown field(s) extra', 'fix the job file',
    ]) expect(text).toContain(p);
  });

  it.each([
    ['not an object', [1, 2], 'expected a JSON object'],
    ['batch above the split', { ...BASE, globalBatch: 60_000 }, 'globalBatch must be an integer in [1, 50000]'],
    ['no length', { ...BASE, epochs: undefined }, 'exactly one of steps or epochs'],
    ['totalSteps given twice', { ...BASE, optimizer: { kind: 'lars', lr: 1, totalSteps: 5 } }, 'optimizer.totalSteps is set from the job'],
    ['optimizer typo', { ...BASE, optimizer: { kind: 'lars', lr: 1, weight_decay: 0 } }, 'unknown field(s) weight_decay'],
    ['milestone after the end', { ...BASE, optimizer: { kind: 'sgd', lr: 1, schedule: 'step', stepMilestones: [500] } }, 'stepMilestones must be'],
    ['optimizer missing', { ...BASE, optimizer: undefined }, 'optimizer must be an object'],
    ['short join token', { ...BASE, access: 'private', joinToken: 'short' }, 'joinToken must be a token of 16'],
    ['token on a public job', { ...BASE, joinToken: 'a-long-lab-token-123' }, 'joinToken is only for access "private"'],
    ['zero checkpoint interval', { ...BASE, checkpointEvery: 0 }, 'checkpointEvery must be'],
    ['too many kept', { ...BASE, keepCheckpoints: 1000 }, 'keepCheckpoints must be'],
    ['negative seed', { ...BASE, seed: -1 }, 'seed must be'],
    ['label smoothing of 0.6', { ...BASE, labelSmoothing: 0.6 }, 'labelSmoothing must be a finite number in [0, 0.5]'],
    ['label smoothing as text', { ...BASE, labelSmoothing: '0.1' }, 'labelSmoothing must be'],
    ['an unknown sampling', { ...BASE, sampling: 'shards' }, 'sampling must be one of global, shard-local'],
    ['a window of 0 shards', { ...BASE, sampling: 'shard-local', shuffleWindow: 0 }, 'shuffleWindow must be an integer in [1, 1024]'],
    ['a window on a global job', { ...BASE, shuffleWindow: 8 }, 'shuffleWindow applies to sampling "shard-local"'],
    ['a negative two-level threshold', { ...BASE, twoLevelFrom: -1 }, 'twoLevelFrom must be an integer in [0, 1024]'],
    ['gradient buckets of 1 KiB', { ...BASE, bucketBytes: 1024 }, 'bucketBytes must be an integer in [4096, 1073741824]'],
    ['overlap as text', { ...BASE, overlap: 'no' }, 'overlap must be'],
    ['a bucket size with overlap off', { ...BASE, overlap: false, bucketBytes: 1 << 20 }, 'bucketBytes cuts the buckets of an overlapped all-reduce'],
    [
      'a last bucket size with overlap off', { ...BASE, overlap: false, lastBucketBytes: 1 << 20 },
      'lastBucketBytes cuts the buckets of an overlapped all-reduce',
    ],
    ['a last bucket of 100 bytes', { ...BASE, lastBucketBytes: 100 }, 'lastBucketBytes must be 0 (no cut) or at least 4096, got 100'],
    ['a negative last bucket', { ...BASE, lastBucketBytes: -1 }, 'lastBucketBytes must be an integer in [0, 1073741824]'],
    ['an unknown wire format', { ...BASE, wire: 'f8' }, 'wire must be one of f32, f16, bf16, i8, got "f8"'],
    ['a wire format in capitals', { ...BASE, wire: 'F16' }, 'wire must be one of f32, f16, bf16, i8'],
    ['a wire format as a number', { ...BASE, wire: 16 }, 'wire must be one of f32, f16, bf16, i8'],
    ['rings given a second to form', { ...BASE, ringFormMs: 1000 }, 'ringFormMs must be an integer in [2000, 120000]'],
    ['verified rounds without the momentum carry', { ...BASE, verify: 0.1, syncEvery: 4 },
      "verify in rounds recomputes a member's round from the round's start, which needs every peer's inner momentum equal: set momentumCarry"],
    ['a verified job that steals', { ...BASE, verify: 0.05, stealFraction: 0.5 },
      'work stealing (stealFraction) hands members tail ids that an audit cannot recompute, so a verified job (verify > 0) does not steal'],
    ['the i8 wire with rounds', { ...BASE, wire: 'i8', syncEvery: 4 },
      "the i8 wire carries what it drops into the next step's gradient (error feedback), which rounds (syncEvery > 1 or \"auto\") do not have"],
  ])('refuses %s', (_n, input, expected) => {
    expect(problems(input)).toContain(expected);
  });

  it('a verified job does not steal unless it asks (and may not ask); an unverified one steals "auto"', () => {
    expect(parseJobConfig({ ...BASE, verify: 0.05 }, 50_000).steal).toBeUndefined();
    expect(parseJobConfig({ ...BASE, verify: 0.05, stealFraction: 'auto' }, 50_000).steal).toBeUndefined();
    expect(parseJobConfig({ ...BASE, verify: 0.05, stealFraction: 0 }, 50_000).verify).toBe(0.05);
    expect(parseJobConfig(BASE, 50_000).steal).toMatchObject({ auto: true });
  });

  it('samples globally unless told otherwise (every earlier job file reads as before); shard-local takes a window', () => {
    expect(parseJobConfig(BASE, 50_000)).toMatchObject({ sampling: 'global', shuffleWindow: 16 });
    expect(parseJobConfig({ ...BASE, sampling: 'shard-local' }, 50_000)).toMatchObject({ sampling: 'shard-local', shuffleWindow: 16 });
    expect(parseJobConfig({ ...BASE, sampling: 'shard-local', shuffleWindow: 32 }, 50_000)).toMatchObject({ sampling: 'shard-local', shuffleWindow: 32 });
  });

  it('gives rings RING_FORM_TIMEOUT_MS to form unless told otherwise, and shows the peers what it was told', () => {
    expect(parseJobConfig(BASE, 50_000).ringFormMs).toBeUndefined();
    const quick = parseJobConfig({ ...BASE, ringFormMs: 5000 }, 50_000);
    expect(quick.ringFormMs).toBe(5000);
    expect(publicJobInfo(quick).ringFormMs).toBe(5000);
  });

  it('all-reduces in two levels from 16 peers unless told otherwise (0: never)', () => {
    expect(parseJobConfig(BASE, 50_000).twoLevelFrom).toBe(16);
    expect(parseJobConfig({ ...BASE, twoLevelFrom: 0 }, 50_000).twoLevelFrom).toBe(0);
    expect(parseJobConfig({ ...BASE, twoLevelFrom: 4 }, 50_000).twoLevelFrom).toBe(4);
  });

  it('overlaps the all-reduce with backward in default buckets unless told otherwise (absent fields: every earlier job file reads as before)', () => {
    const plain = parseJobConfig(BASE, 50_000);
    expect('bucketBytes' in plain || 'overlap' in plain).toBe(false);
    expect(parseJobConfig({ ...BASE, bucketBytes: 65536 }, 50_000).bucketBytes).toBe(65536);
    expect('lastBucketBytes' in plain).toBe(false);
    expect(parseJobConfig({ ...BASE, lastBucketBytes: 0 }, 50_000).lastBucketBytes).toBe(0);
    expect(publicJobInfo(parseJobConfig({ ...BASE, lastBucketBytes: 8192 }, 50_000)).lastBucketBytes).toBe(8192);
    expect(parseJobConfig({ ...BASE, overlap: false }, 50_000).overlap).toBe(false);
    expect(publicJobInfo(parseJobConfig({ ...BASE, bucketBytes: 65536 }, 50_000)).bucketBytes).toBe(65536);
  });

  it('sends float32 on the wire unless told otherwise; f16 and bf16 are read, written and shown to the peers as given', () => {
    expect(DEFAULT_WIRE).toBe('f32');
    expect(parseJobConfig(BASE, 50_000).wire).toBe('f32');
    expect(publicJobInfo(parseJobConfig(BASE, 50_000)).wire).toBe('f32');
    // The default is never written: an f32 job's file is byte for byte what it was before the setting.
    expect(wireField('f32')).toEqual({});
    expect(JSON.stringify({ ...BASE, ...wireField('f32') })).toBe(JSON.stringify(BASE));
    for (const wire of WIRE_FORMATS) {
      // The job file as written (JSON), read back (resume), and as GET /api/job shows it to the volunteers.
      const file = JSON.parse(JSON.stringify({ ...BASE, ...wireField(wire) })) as Record<string, unknown>;
      expect(file.wire).toBe(wire === 'f32' ? undefined : wire);
      const job = parseJobConfig(file, 50_000);
      expect(job.wire).toBe(wire);
      expect(parseJobConfig({ ...BASE, wire }, 50_000).wire).toBe(wire);
      const shown = JSON.parse(JSON.stringify(publicJobInfo(job))) as { wire?: unknown };
      expect(jobWire(shown)).toBe(wire);
    }
  });

  it('a volunteer takes a coordinator\'s job without a wire as f32 and refuses a format it does not know', () => {
    expect(jobWire({})).toBe('f32');
    expect(() => jobWire({ wire: 'f8' })).toThrow(/wire format is "f8"; this volunteer knows f32, f16, bf16/);
    expect(() => jobWire({ wire: null })).toThrow(/wire format is null/);
  });

  it('knows the same data sets as the shard builder', () => {
    expect([...JOB_DATASETS]).toEqual([...DATASETS]);
  });
});

describe('membership', () => {
  const g0 = { index: 4, ring: ['a', 'b', 'c'] };

  it('keeps survivors in order and appends joiners', () => {
    expect(nextGeneration(g0, ['d', 'e'], ['b'])).toEqual({ index: 5, ring: ['a', 'c', 'd', 'e'] });
  });

  it('ignores duplicates, unknown leavers, and a peer that joined and left', () => {
    expect(nextGeneration(g0, ['a', 'd', 'd', 'x'], ['zz', 'x'])).toEqual({ index: 5, ring: ['a', 'b', 'c', 'd'] });
  });

  it('returns the same generation when nothing changes', () => {
    expect(nextGeneration(g0, ['b'], ['q'])).toBe(g0);
  });

  it('changes membership only at step boundaries', () => {
    let m = startMembership();
    m = requestJoin(requestJoin(requestJoin(m, 'a'), 'b'), 'a');
    expect(m.generation.ring).toEqual([]);
    m = atStepBoundary(m);
    expect(m).toEqual({ generation: { index: 1, ring: ['a', 'b'] }, joining: [], leaving: [] });
    m = requestJoin(requestLeave(m, 'a'), 'c');
    expect(m.generation).toEqual({ index: 1, ring: ['a', 'b'] });
    m = atStepBoundary(m);
    expect(m.generation).toEqual({ index: 2, ring: ['b', 'c'] });
    expect(atStepBoundary(m).generation).toBe(m.generation);
  });
});

describe('splitBatch', () => {
  it('splits in proportion to throughput', () => {
    expect(splitBatch(100, [1, 1, 2])).toEqual([25, 25, 50]);
    expect(splitBatch(1024, [10])).toEqual([1024]);
  });

  it('gives leftovers to the largest remainders, ties to the lower rank', () => {
    expect(splitBatch(10, [1, 1, 1])).toEqual([4, 3, 3]);
    expect(splitBatch(11, [1, 1, 1])).toEqual([4, 4, 3]);
    expect(splitBatch(7, [1, 2, 2])).toEqual([1, 3, 3]); // 1.4, 2.8, 2.8
  });

  it('gives every peer at least 1 when B >= N, taken from the largest slice', () => {
    expect(splitBatch(4, [1000, 1, 1, 1])).toEqual([1, 1, 1, 1]);
    expect(splitBatch(10, [1000, 1, 1])).toEqual([8, 1, 1]);
    expect(splitBatch(2, [1, 1, 1])).toEqual([1, 1, 0]);
  });

  it('always sums to B, deterministically, on random rings', () => {
    const rng = makeRng(7);
    for (let c = 0; c < 2000; c++) {
      const n = 1 + rng.int(40);
      const b = 1 + rng.int(rng.int(2) ? 70 : 5000);
      const t = Array.from({ length: n }, () => 10 ** (rng.next() * 6 - 3));
      const s = splitBatch(b, t);
      expect(s.reduce((a, v) => a + v, 0)).toBe(b);
      expect(s.every((v) => Number.isInteger(v) && v >= (b >= n ? 1 : 0))).toBe(true);
      expect(splitBatch(b, t)).toEqual(s);
      // Proportional: no slice is more than one image from its share, unless the minimum of 1 moved it.
      if (s.every((v, i) => Math.floor((b * t[i]!) / t.reduce((x, y) => x + y, 0)) >= 1)) {
        const total = t.reduce((x, y) => x + y, 0);
        s.forEach((v, i) => expect(Math.abs(v - (b * t[i]!) / total)).toBeLessThan(1));
      }
    }
  });

  it('refuses bad input with a reason', () => {
    expect(() => splitBatch(0, [1])).toThrow(/global batch must be an integer >= 1/);
    expect(() => splitBatch(8, [])).toThrow(/ring is empty/);
    expect(() => splitBatch(8, [1, Number.NaN])).toThrow(/throughput of rank 1/);
    expect(() => splitBatch(8, [1, 0])).toThrow(/throughput of rank 1/);
  });
});
