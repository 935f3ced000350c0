// One training step on one peer, recorded on the model's engine without readback:
//   zero G; forward (training mode); loss with dlogits = softmax - onehot (a SUM over the
//   samples: slices from many peers add up); backward ADDING into G; then (after an
//   all-reduce in the distributed case) the optimiser with gradScale = 1 / global batch.
import type { TensorLike } from '../backend/engine.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { Model } from '../nn/model.ts';
import type { Optimizer } from '../optim/gpu-types.ts';

export interface HostBatch { x: Float32Array; labels: Int32Array; shape: readonly [number, number, number, number] }

/** Uploads a batch into a tensor (reused across steps of the same shape) and the model's labels. */
export function uploadBatch<T extends TensorLike>(model: Model<T>, batch: HostBatch, reuse: T | null): T {
  const e = model.engine;
  const n = batch.shape[0];
  const sameShape = reuse && reuse.shape.every((d, i) => d === batch.shape[i]);
  const x = sameShape ? reuse : e.empty(batch.shape, 'f32', 'batch.x');
  if (reuse && !sameShape) e.release(reuse);
  e.write(x, batch.x);
  e.write(model.labelsTensor(n), batch.labels);
  return x;
}

/**
 * Records forward + loss + backward; returns the tensor holding this slice's summed loss
 * (against targets smoothed by `labelSmoothing`, 0: none). `accumulate`: the gradient is added
 * to the one the model holds (a micro-batch of a larger slice) instead of replacing it.
 */
export function recordGradients<T extends TensorLike>(model: Model<T>, x: T, stepSeed: number, labelSmoothing = 0, accumulate = false): T {
  if (!accumulate) model.zeroGrads();
  model.forward(x, { train: true, seed: stepSeed });
  const total = model.loss(1, labelSmoothing);
  model.backward();
  return total;
}

/** Records the (WebGPU) optimiser step for step t of a global batch of `globalBatch` samples. */
export function recordUpdate(model: Model<Tensor>, opt: Optimizer, t: number, globalBatch: number): void {
  opt.step({ w: model.params, g: model.grads, t, gradScale: 1 / globalBatch });
}
