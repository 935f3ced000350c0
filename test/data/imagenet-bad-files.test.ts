// Bad files in an ImageNet folder: each kind is reported by path with what was done
// (converted or skipped) in build-report.json and on stderr, and the build finishes with
// every good image. A converted image keeps its class's pixels.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { buildShards } from '../../coordinator/data/cli.ts';
import type { BuildReport } from '../../coordinator/data/build-report.ts';
import { prepareImage } from '../../coordinator/data/imagenet-image.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { tempDir } from './helpers.ts';
import { BAD_ACTION, classOf, makeImagenetFolder, readSplit, type BadKind, type ImagenetFolder } from '../../testbed/imagenet-fixtures.ts';

const KINDS = Object.keys(BAD_ACTION) as BadKind[];
const REASON: Record<BadKind, RegExp> = {
  empty: /^empty file \(0 bytes\)$/,
  garbage: /^not an image any codec here reads \(/,
  truncated: /^truncated JPEG: no end-of-image marker \(/,
  cmyk: /^CMYK converted to sRGB$/,
  grey: /^greyscale converted to RGB$/,
  png: /^PNG data under a \.JPEG name$/,
  huge: /^too large: 60000x60000 is over the 89478485-pixel limit/,
  'unknown-val-class': /^class not in train\/ \(n09999999, from .*LOC_val_solution\.csv\)$/,
};

describe('bad files', () => {
  let root: string;
  let fixture: ImagenetFolder;
  let manifest: Manifest;
  let report: BuildReport;
  let stderr = '';
  beforeAll(async () => {
    root = await tempDir('imagenet-bad');
    fixture = await makeImagenetFolder(
      join(root, 'src'), { classes: 3, trainPerClass: 6, valPerClass: 2, valLayout: 'kaggle', sizes: [20, 60], seed: 5, bad: KINDS },
    );
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    try {
      manifest = await buildShards({ dataset: 'imagenet', src: fixture.root, out: join(root, 'out'), size: 32, samplesPerShard: 5, progress: false });
    } finally {
      spy.mockRestore();
    }
    report = JSON.parse(await readFile(join(root, 'out', 'build-report.json'), 'utf8')) as BuildReport;
  });

  it('the build finishes with every good image and the converted ones', () => {
    expect(fixture.bad.map((b) => b.kind).sort()).toEqual([...KINDS].sort());
    expect(manifest.splits.train.samples).toBe(3 * 6 + 3);
    expect(manifest.splits.train.samples).toBe(fixture.trainSamples);
    expect(manifest.splits.val.samples).toBe(6);
  });

  it.each(KINDS)('%s: reported by path with its action and reason', (kind) => {
    const bad = fixture.bad.find((b) => b.kind === kind);
    if (!bad) throw new Error(`the fixture has no ${kind} file`);
    const got = report.files.filter((f) => f.path === bad.path);
    expect(got).toEqual([{ path: bad.path, action: BAD_ACTION[kind], reason: expect.stringMatching(REASON[kind]) }]);
  });

  it('the report lists nothing else; stderr has the counts and the paths', () => {
    expect(report.files).toHaveLength(KINDS.length);
    expect(report.counts).toEqual({ converted: 3, skipped: 5 });
    expect(report.layout).toBe('train: class folders; val: LOC_val_solution.csv');
    expect(stderr).toMatch(/data: 3 file\(s\) converted, 5 skipped:/);
    expect(stderr).toMatch(/1 x skipped: truncated JPEG\n/);
    for (const b of fixture.bad) expect(stderr).toContain(`${b.action} ${b.path}: `);
    expect(stderr).toContain(`the full list is in ${join(root, 'out', 'build-report.json')}`);
  });

  it('converted images are 32x32 RGB JPEGs; the CMYK and PNG ones keep their class colour', async () => {
    const train = await readSplit(join(root, 'out'), manifest, 'train');
    expect(train.filter((s) => s.label === 0)).toHaveLength(6 + 3);
    let class0 = 0;
    for (const s of train) {
      const meta = await sharp(s.bytes).metadata();
      expect([meta.format, meta.width, meta.height, meta.channels]).toEqual(['jpeg', 32, 32, 3]);
      const c = await classOf(s.bytes, 3);
      if (s.label === 0 && c === 0) class0++;
      else expect(c, 'only the grey image may lose its class colour').toBe(s.label === 0 ? c : s.label);
    }
    expect(class0).toBeGreaterThanOrEqual(6 + 2);
  });

  it('prepareImage: the pixel limit is an option; a JPEG already at the size is stored as it is', async () => {
    const png = await readFile(fixture.bad.find((b) => b.kind === 'png')?.path ?? '');
    expect(await prepareImage(new Uint8Array(png), 'x.png', { size: 16, maxPixels: 100 })).toEqual({
      ok: false, reason: expect.stringMatching(/^too large: 60x50 is over the 100-pixel limit/),
    });
    const ok = await prepareImage(new Uint8Array(png), 'x.png', { size: 16 });
    expect(ok).toMatchObject({ ok: true, converted: null });
    if (!ok.ok) throw new Error('not prepared');
    const again = await prepareImage(ok.bytes, 'y.JPEG', { size: 16 });
    expect(again).toMatchObject({ ok: true, converted: null, bytes: ok.bytes });
  });
});
