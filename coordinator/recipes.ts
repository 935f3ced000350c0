// The default training recipe of each model for an ImageNet job: the LARS recipe of You,
// Gitman and Ginsburg (2017) and "ImageNet Training in Minutes" (You et al. 2018): linear
// warm-up over a few epochs, then poly(2) decay of the global rate to zero at the end, momentum
// 0.9, weight decay 5e-4, trust coefficient eta 0.001, at the papers' large batches (AlexNet and
// AlexNet-BN at 8K, ResNet-50 at 32K).
//
// The batches, epochs and warm-ups are the papers'; the global rates are starting points in the
// range LARS uses at those batches with eta 0.001, not yet tuned on ImageNet by this project. A
// volunteer ring with fewer images per second uses a smaller --batch: the rate then follows the
// square-root rule of the LARS papers (lr x sqrt(B / B_recipe)), and --lr overrides it.
import type { ModelName } from '../src/nn/models.ts';

export interface Recipe {
  /** Global batch B of the recipe. */
  batch: number;
  epochs: number;
  warmupEpochs: number;
  /** LARS global rate at `batch` (eta = 0.001 trust coefficient). */
  lr: number;
  momentum: number;
  weightDecay: number;
  eta: number;
  /** Where the numbers come from (shown by --help). */
  source: string;
  /**
   * Ghost batch norm's images per BN group by image side, for models with BN: Goyal et al.'s 32 per
   * worker where one group fits a volunteer, else what fits both a 2 GiB WebGPU budget and wasm's
   * 4 GiB (src/nn/fit.ts; ResNet-50 measured 97 MiB an image at 64 and 128 pixels, 289 at 224).
   */
  bnGroup?: Readonly<Record<number, number>>;
}

const LARS = { momentum: 0.9, weightDecay: 5e-4, eta: 0.001 } as const;

export const IMAGENET_RECIPES: Readonly<Record<'alexnet' | 'alexnet-bn' | 'resnet50', Recipe>> = {
  alexnet: { ...LARS, batch: 8192, epochs: 100, warmupEpochs: 2, lr: 10, source: 'the LARS paper\'s AlexNet batch; rate a starting point, not tuned here' },
  'alexnet-bn': {
    ...LARS, batch: 8192, epochs: 100, warmupEpochs: 2, lr: 14, bnGroup: { 64: 32, 128: 32, 224: 32 },
    source: 'the LARS paper\'s AlexNet-BN batch; rate a starting point, not tuned here',
  },
  resnet50: {
    ...LARS, batch: 32768, epochs: 90, warmupEpochs: 5, lr: 29, bnGroup: { 64: 8, 128: 8, 224: 4 },
    source: 'ImageNet in Minutes\' ResNet-50 batch; rate a starting point, not tuned here',
  },
};

export const IMAGENET_MODELS = Object.keys(IMAGENET_RECIPES) as (keyof typeof IMAGENET_RECIPES)[];

export function isImagenetModel(m: ModelName): m is keyof typeof IMAGENET_RECIPES {
  return (IMAGENET_MODELS as readonly string[]).includes(m);
}

/** The recipe's BN group for images of `side` pixels (the smallest it names for another side); undefined: a model without BN. */
export function recipeBnGroup(r: Recipe, side: number): number | undefined {
  if (!r.bnGroup) return undefined;
  return r.bnGroup[side] ?? Math.min(...Object.values(r.bnGroup));
}

/**
 * The recipe's BN group at `batch` over a first ring of `peers`: the group itself where it divides
 * the batch and every peer gets a group, else the largest power of two below it that does.
 */
export function defaultBnGroup(group: number, batch: number, peers = 1): number {
  let g = 1;
  while (g * 2 <= group && batch % (g * 2) === 0 && (g * 2) * Math.max(1, peers) <= batch) g *= 2;
  return g;
}

/** The recipe's rate for another global batch: square-root scaling, as the LARS papers do. */
export function scaledLr(r: Recipe, batch: number): number {
  return +(r.lr * Math.sqrt(batch / r.batch)).toPrecision(4);
}

/** The recipe for `model` at `batch` images per step. */
export function imagenetJobDefaults(model: keyof typeof IMAGENET_RECIPES, batch?: number): Recipe {
  const r = IMAGENET_RECIPES[model];
  return batch === undefined || batch === r.batch ? r : { ...r, batch, lr: scaledLr(r, batch) };
}
