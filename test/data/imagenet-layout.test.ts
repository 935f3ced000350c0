// The ImageNet layouts: val as class folders, as Kaggle's flat folder + LOC_val_solution.csv
// (in the root or in val/), as Tiny-ImageNet's images/ + val_annotations.txt, and Tiny-ImageNet's
// train/<wnid>/images/: the same images give the same manifest, the same train shards and
// the same val samples. No val/ is said on stderr; unreadable layouts are refused with the
// drawing of the accepted ones.

import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildShards } from '../../coordinator/data/cli.ts';
import { IMAGENET_LAYOUTS } from '../../coordinator/data/imagenet-layout.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import type { EncodedSample } from '../../src/data/shard.ts';
import { tempDir } from './helpers.ts';
import { classOf, makeImagenetFolder, readSplit, type FixtureValLayout, type ImagenetFolderOptions } from '../../testbed/imagenet-fixtures.ts';

const CLASSES = 4;
const base: ImagenetFolderOptions = { classes: CLASSES, trainPerClass: 5, valPerClass: 3, valLayout: 'folders', sizes: [20, 70], seed: 11 };

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex').slice(0, 16);

interface Built {
  manifest: Manifest;
  train: EncodedSample[];
  val: EncodedSample[];
  stderr: string;
}

let root: string;
const stderr = (): { text: () => string } => {
  const lines: string[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  return { text: () => lines.join('') };
};
afterEach(() => vi.restoreAllMocks());

async function build(name: string, opts: Partial<ImagenetFolderOptions> & { valLayout: FixtureValLayout }): Promise<Built> {
  const src = join(root, `src-${name}`);
  await makeImagenetFolder(src, { ...base, ...opts });
  const out = join(root, `out-${name}`);
  const err = stderr();
  const manifest = await buildShards({ dataset: 'imagenet', src, out, size: 32, samplesPerShard: 8, progress: false });
  vi.restoreAllMocks();
  return { manifest, train: await readSplit(out, manifest, 'train'), val: await readSplit(out, manifest, 'val'), stderr: err.text() };
}

describe('ImageNet layouts', () => {
  const built = new Map<string, Built>();
  beforeAll(async () => {
    root = await tempDir('imagenet-layout');
    built.set('folders', await build('folders', { valLayout: 'folders' }));
    built.set('kaggle-root', await build('kaggle-root', { valLayout: 'kaggle' }));
    built.set('kaggle-val', await build('kaggle-val', { valLayout: 'kaggle', csvIn: 'val' }));
    built.set('tiny', await build('tiny', { valLayout: 'tiny' }));
  });

  it('class folders: classes from train/, labels that match the pixels, a seeded shuffle of train', async () => {
    const b = built.get('folders');
    if (!b) throw new Error('not built');
    expect(b.manifest.classes).toHaveLength(CLASSES);
    expect(b.manifest.splits.train.samples).toBe(20);
    expect(b.manifest.splits.val.samples).toBe(12);
    expect(b.manifest.splits.train.shards.map((s) => s.samples)).toEqual([8, 8, 4]);
    for (const s of [...b.train, ...b.val]) expect(await classOf(s.bytes, CLASSES)).toBe(s.label);
    expect(new Set(b.train.slice(0, 8).map((s) => s.label)).size).toBeGreaterThan(1);
    expect(b.stderr).toMatch(/no bad files \(train: class folders; val: class folders\)/);
  });

  it.each(['kaggle-root', 'kaggle-val', 'tiny'])('%s gives the same manifest, train shards and val samples as class folders', async (name) => {
    const a = built.get('folders');
    const b = built.get(name);
    if (!a || !b) throw new Error('not built');
    expect(b.manifest.classes).toEqual(a.manifest.classes);
    expect(b.manifest.splits.train).toEqual(a.manifest.splits.train);
    expect(b.manifest.mean).toEqual(a.manifest.mean);
    expect(b.manifest.splits.val.samples).toBe(a.manifest.splits.val.samples);
    expect(b.train.map((s) => [s.label, sha(s.bytes)])).toEqual(a.train.map((s) => [s.label, sha(s.bytes)]));
    const valSet = (x: Built): string[] => x.val.map((s) => `${s.label}:${sha(s.bytes)}`).sort();
    expect(valSet(b)).toEqual(valSet(a));
    expect(b.stderr).toMatch(name === 'tiny' ? /Tiny-ImageNet class folders.*val: val_annotations\.txt/ : /val: LOC_val_solution\.csv/);
  });

  it('no val/: an empty val split, said on stderr; classes without val images are a note', async () => {
    const b = await build('none', { valLayout: 'none' });
    expect(b.manifest.splits.val).toEqual({ samples: 0, shards: [] });
    expect(b.stderr).toMatch(/val does not exist: the data set has no val split/);
    const c = await build('partial-val', { valLayout: 'kaggle', classesWithoutVal: 1 });
    expect(c.manifest.splits.val.samples).toBe(9);
    expect(c.stderr).toMatch(/note: 1 of 4 classes have no val images \(n01444115\)/);
    const report = JSON.parse(await readFile(join(root, 'out-partial-val', 'build-report.json'), 'utf8')) as { notes: string[] };
    expect(report.notes).toEqual([expect.stringMatching(/1 of 4 classes have no val images/)]);
  });

  it('finds Kaggle\'s ILSVRC/Data/CLS-LOC/ below the folder given', async () => {
    const src = join(root, 'kaggle-tree');
    await makeImagenetFolder(join(src, 'ILSVRC', 'Data', 'CLS-LOC'), { ...base, valLayout: 'kaggle' });
    await writeFile(join(src, 'LOC_val_solution.csv'), await readFile(join(src, 'ILSVRC', 'Data', 'CLS-LOC', 'LOC_val_solution.csv')));
    await rm(join(src, 'ILSVRC', 'Data', 'CLS-LOC', 'LOC_val_solution.csv'));
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const m = await buildShards({ dataset: 'imagenet', src, out: join(root, 'out-kaggle-tree'), size: 32, samplesPerShard: 8, progress: false });
    expect(m.splits.val.samples).toBe(12);
  });
});

describe('layouts the builder refuses, showing the accepted ones', () => {
  const refused = async (src: string, pattern: RegExp): Promise<void> => {
    const out = join(src, '..', `${src.split('/').pop()}-out`);
    const err = buildShards({ dataset: 'imagenet', src, out, size: 32, progress: false });
    await expect(err).rejects.toMatchObject({ kind: 'source-missing', message: expect.stringMatching(pattern) });
    await expect(buildShards({ dataset: 'imagenet', src, out, size: 32, progress: false })).rejects.toThrow(IMAGENET_LAYOUTS);
    expect((await readdir(join(src, '..'))).filter((f) => f.startsWith(`${src.split('/').pop()}-out`))).toEqual([]);
  };

  beforeAll(async () => {
    root = await tempDir('imagenet-refused');
  });

  it('the drawing shows the three val layouts and Tiny-ImageNet train', () => {
    expect(IMAGENET_LAYOUTS).toMatch(/├── train\//);
    expect(IMAGENET_LAYOUTS).toMatch(/\(a\) val\/n01440764\/\*\.JPEG/);
    expect(IMAGENET_LAYOUTS).toMatch(/\(b\) val\/\*\.JPEG \+ LOC_val_solution\.csv/);
    expect(IMAGENET_LAYOUTS).toMatch(/\(c\) val\/images\/\*\.JPEG \+ val\/val_annotations\.txt/);
    expect(IMAGENET_LAYOUTS).toMatch(/n01443537\/images\/\*\.JPEG/);
  });

  it('no train/', async () => {
    const src = join(root, 'no-train');
    await mkdir(join(src, 'val'), { recursive: true });
    await refused(src, /no-train\/train does not exist/);
  });

  it('train/ with images but no class folders', async () => {
    const src = join(root, 'flat-train');
    await makeImagenetFolder(src, { ...base, classes: 1, valLayout: 'none' });
    const dir = join(src, 'train', 'n01440764');
    for (const f of await readdir(dir)) await writeFile(join(src, 'train', f), await readFile(join(dir, f)));
    await rm(dir, { recursive: true });
    await refused(src, /train holds 5 images but no class folders/);
  });

  it('class folders without images', async () => {
    const src = join(root, 'empty-classes');
    await mkdir(join(src, 'train', 'n01440764'), { recursive: true });
    await refused(src, /has 1 class folders but no \.JPEG\/\.PNG files/);
  });

  it('a flat val/ without an annotation file', async () => {
    const src = join(root, 'flat-val');
    await makeImagenetFolder(src, { ...base, valLayout: 'kaggle' });
    await rm(join(src, 'LOC_val_solution.csv'));
    await refused(src, /holds 12 images in one flat folder and no LOC_val_solution\.csv/);
  });

  it('an annotation file that names files that are not there', async () => {
    const src = join(root, 'missing-val');
    await makeImagenetFolder(src, { ...base, valLayout: 'kaggle' });
    await rm(join(src, 'val', 'ILSVRC2012_val_00000003.JPEG'));
    await refused(src, /LOC_val_solution\.csv names 1 file\(s\) that .* does not have \(ILSVRC2012_val_00000003\.JPEG\)/);
    const tiny = join(root, 'missing-tiny');
    await makeImagenetFolder(tiny, { ...base, valLayout: 'tiny' });
    await rm(join(tiny, 'val', 'images', 'val_5.JPEG'));
    await refused(tiny, /val_annotations\.txt names 1 file\(s\) .*\(val_5\.JPEG\)/);
  });

  it('a CSV without its header', async () => {
    const src = join(root, 'bad-csv');
    await makeImagenetFolder(src, { ...base, valLayout: 'kaggle' });
    const csv = join(src, 'LOC_val_solution.csv');
    await writeFile(csv, (await readFile(csv, 'utf8')).split('\n').slice(1).join('\n'));
    await refused(src, /does not start with the header ImageId,PredictionString/);
  });
});
