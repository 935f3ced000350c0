// npm start's data set and the job defaults that follow from it: the embedded data sets
// (CIFAR-10, MNIST: built into the cache on first use), or an ImageNet folder given by --data
// (built once into shards per image size, reused after; or shards already built).
import { resolve } from 'node:path';
import type { Manifest } from '../src/data/manifest.ts';
import type { ModelName } from '../src/nn/models.ts';
import { ArgError, type Args } from '../src/cli/args.ts';
import { ensureDataset, IMAGENET_SIZES, type DatasetName } from './data/cli.ts';
import { ensureImagenet } from './data/imagenet-ensure.ts';
import type { JobSampling } from './job.ts';
import { IMAGENET_RECIPES, isImagenetModel, scaledLr, type Recipe } from './recipes.ts';

export { DEFAULT_SHUFFLE_WINDOW } from './job.ts';
export const DEFAULT_IMAGENET_MODEL: ModelName = 'alexnet-bn';
export type SamplingKind = JobSampling;

export interface DataChoice {
  dataset: DatasetName;
  /** The folder argument (imagenet), resolved. */
  data: string | null;
  /** Image size asked for (imagenet), null when not given. */
  size: number | null;
}

/** Reads --dataset, --data and --size; checks they go together. */
export function readDataChoice(a: Args): DataChoice {
  const dataset = a.oneOf<DatasetName>('dataset', ['cifar10', 'mnist', 'imagenet'], 'cifar10');
  const dataArg = a.str('data', '');
  const sizeArg = a.str('size', '');
  if (dataset !== 'imagenet') {
    if (dataArg) throw new ArgError(`--data is for --dataset imagenet (${dataset} is built into the cache by itself)`);
    if (sizeArg) throw new ArgError(`--size is for --dataset imagenet (${dataset} keeps its own image size)`);
    return { dataset, data: null, size: null };
  }
  if (!dataArg || dataArg === 'true') {
    throw new ArgError('--dataset imagenet needs --data DIR: an ImageNet folder (DIR/train/<wnid>/*.JPEG, and val/ in one of the usual layouts) '
      + 'or a folder of shards built before (DIR/manifest.json)');
  }
  let size: number | null = null;
  if (sizeArg) {
    size = Number(sizeArg);
    if (!IMAGENET_SIZES.includes(size)) throw new ArgError(`--size must be one of ${IMAGENET_SIZES.join(', ')} (pixels a side); got "${sizeArg}"`);
  }
  return { dataset, data: resolve(dataArg), size };
}

export interface LoadedData {
  manifest: Manifest;
  /** The data set's own folder when it is not `<cache>/<dataset>`. */
  dataFolder?: string;
  /** Job name suffix: the data set, with the size for ImageNet ("imagenet64"). */
  label: string;
}

/** Builds (first time) or finds the shards of the chosen data set. */
export async function loadData(c: DataChoice, cache: string): Promise<LoadedData> {
  if (c.dataset !== 'imagenet') return { manifest: await ensureDataset(c.dataset, cache), label: c.dataset };
  const size = c.size ?? IMAGENET_SIZES[0]!;
  const { manifest, dir } = await ensureImagenet({ src: c.data!, size, cacheDir: cache });
  const built = manifest.image.height;
  if (c.size !== null && built !== c.size) {
    throw new ArgError(`--size ${c.size}, but the shards in ${c.data} hold ${built}x${built} images: `
      + `leave out --size, or give --data the ImageNet folder to build ${c.size}x${c.size} shards from`);
  }
  return { manifest, dataFolder: dir, label: `imagenet${built}` };
}

/** The job's defaults for a model on a data set: the paper's LARS recipe for the ImageNet models. */
export function recipeFor(dataset: DatasetName, model: ModelName): Recipe | null {
  return dataset === 'imagenet' && isImagenetModel(model) ? IMAGENET_RECIPES[model] : null;
}

/**
 * The global batch a job uses when --batch is not given: the recipe's, unless the training
 * split is too small for it (a sample folder): then the largest power of two up to a quarter
 * of the split, so an epoch still has a few steps.
 */
export function defaultBatch(recipeBatch: number, trainSamples: number): number {
  if (recipeBatch * 4 <= trainSamples) return recipeBatch;
  return Math.max(1, 2 ** Math.floor(Math.log2(Math.max(1, trainSamples / 4))));
}

export { scaledLr };
