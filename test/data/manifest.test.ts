import { describe, expect, it } from 'vitest';
import { DataError } from '../../src/data/errors.ts';
import { makeShardIndex, sampleKey, shardFileName, validateManifest, type Manifest } from '../../src/data/manifest.ts';

const good: Manifest = {
  format: 'vt-shards',
  version: 1,
  dataset: 'cifar10',
  classes: ['a', 'b'],
  image: { channels: 3, height: 32, width: 32, encoding: 'png' },
  mean: [0.5, 0.4, 0.3],
  std: [0.2, 0.2, 0.2],
  gzip: true,
  splits: {
    train: {
      samples: 12,
      shards: [
        { file: 'train-000000.tar.gz', samples: 5, bytes: 100 },
        { file: 'train-000001.tar.gz', samples: 5, bytes: 100 },
        { file: 'train-000002.tar.gz', samples: 2, bytes: 50 },
      ],
    },
    val: { samples: 0, shards: [] },
  },
};

function problems(json: unknown): string {
  try {
    validateManifest(json, 'm.json');
  } catch (e) {
    expect(e).toBeInstanceOf(DataError);
    expect((e as DataError).kind).toBe('bad-manifest');
    expect((e as DataError).message).toMatch(/rebuild the data set with the coordinator CLI/);
    return (e as DataError).message;
  }
  throw new Error('validateManifest accepted a bad manifest');
}

describe('manifest validation', () => {
  it('accepts a good manifest and returns it', () => {
    expect(validateManifest(JSON.parse(JSON.stringify(good)))).toEqual(good);
  });

  it('rejects non-objects and wrong format/version', () => {
    expect(problems(42)).toMatch(/m\.json is not a JSON object/);
    expect(problems({ ...good, format: 'tar' })).toMatch(/"format" must be "vt-shards" \(got "tar"\)/);
    expect(problems({ ...good, version: 2 })).toMatch(/"version" must be 1/);
  });

  it('lists every problem at once', () => {
    const m = problems({ ...good, classes: ['a', 'a'], image: { ...good.image, channels: 4, encoding: 'gif' }, std: [0.1, 0, 0.1] });
    expect(m).toMatch(/duplicate names/);
    expect(m).toMatch(/"image\.channels" must be 1 or 3/);
    expect(m).toMatch(/"image\.encoding" must be "png" or "jpg"/);
    expect(m).toMatch(/"std" values must be > 0/);
  });

  it('checks mean/std length against channels', () => {
    expect(problems({ ...good, mean: [0.5] })).toMatch(/"mean" must be an array of 3 finite numbers/);
  });

  it('checks shard entries: names safe to serve, counts, gzip suffix, sums', () => {
    const shards = [...good.splits.train.shards];
    const withShard = (s: unknown, samples = 12): unknown => ({ ...good, splits: { ...good.splits, train: { samples, shards: [s, ...shards.slice(1)] } } });
    expect(problems(withShard({ ...shards[0], file: '../etc/passwd' }))).toMatch(/shards\[0\]"\.file must be a plain file name/);
    expect(problems(withShard({ ...shards[0], file: 'train-0.tar' }))).toMatch(/must end in \.tar\.gz since "gzip" is true/);
    expect(problems(withShard({ ...shards[0], samples: 0 }))).toMatch(/shards\[0\]"\.samples must be a positive integer/);
    expect(problems(withShard(shards[0], 13))).toMatch(/"splits\.train\.samples" must equal the sum over its shards \(12\)/);
    expect(problems({ ...good, splits: { train: good.splits.train } })).toMatch(/"splits\.val" must be an object/);
  });
});

describe('shard index', () => {
  const index = makeShardIndex(good.splits.train);

  it('maps global ids to (shard, index) and back', () => {
    expect(index.samples).toBe(12);
    const where = Array.from({ length: 12 }, (_, id) => index.locate(id));
    expect(where.map((w) => w.shard)).toEqual([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2]);
    expect(where.map((w) => w.index)).toEqual([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
    expect([0, 1, 2].map((k) => index.firstId(k))).toEqual([0, 5, 10]);
  });

  it('groups ids by shard, keeping their positions', () => {
    const g = index.group([11, 0, 6, 4, 10]);
    expect([...g]).toEqual([
      [0, [1, 3]],
      [1, [2]],
      [2, [0, 4]],
    ]);
  });

  it('rejects ids outside the split', () => {
    expect(() => index.locate(12)).toThrow(/sample id 12 is outside this split \(0\.\.11\)/);
    expect(() => index.locate(-1)).toThrow(DataError);
    expect(() => index.locate(1.5)).toThrow(DataError);
  });

  it('names keys and shard files', () => {
    expect(sampleKey(42)).toBe('000000042');
    expect(shardFileName('val', 3, false)).toBe('val-000003.tar');
  });
});
