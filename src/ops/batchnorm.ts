// Batch normalisation over the channels of NCHW [N, C, H, W], or the features of [N, F]
// (BN after a linear layer: H = W = 1). Kernels and formulas in shaders/batchnorm.wgsl.
// Conventions (PyTorch's): training normalises with the batch mean and the BIASED batch
// variance over (N, H, W); running_mean/running_var are updated in place as
// running = (1 - momentum) * running + momentum * batch, where running_var takes the UNBIASED
// batch variance (M / (M - 1) times; with M = N*H*W = 1 it is taken as 0, where PyTorch
// refuses). Inference normalises with the running statistics. Reductions run one workgroup
// per channel with a fixed-order tree (no atomics): bitwise reproducible.
import code from '../../shaders/batchnorm.wgsl?raw';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { type BatchNormBackwardParams, type BatchNormDims, type BatchNormParams, checkBatchNormOperands } from '../shapes/batchnorm.ts';
import { type BatchSlice, batchSlices } from './pool.ts';

// The shape rules live in src/shapes/batchnorm.ts; re-exported for the ops namespace.
export type { BatchNormBackwardParams, BatchNormDims, BatchNormParams } from '../shapes/batchnorm.ts';
export { batchNormDims } from '../shapes/batchnorm.ts';

const KERNEL: Kernel = { name: 'batchnorm', code };
const WG = 256;

interface Flags { first?: boolean; last?: boolean; mode?: number; acc?: boolean; eps?: number; momentum?: number }

function uniforms(d: BatchNormDims, s: BatchSlice | null, f: Flags): Scalar[] {
  const b = (v: boolean | undefined): number => (v ? 1 : 0);
  return [
    ['u32', s?.count ?? 0], ['u32', d.c], ['u32', d.hw], ['u32', s?.skips[0] ?? 0],
    ['u32', b(f.first)], ['u32', b(f.last)], ['u32', f.mode ?? 0], ['u32', b(f.acc)],
    ['f32', d.n * d.hw], ['f32', f.eps ?? 0], ['f32', f.momentum ?? 0],
  ];
}

/** The shader's storage bindings in order (@binding(1) onwards); each entry point uses a few. */
const ORDER = ['x', 'dy', 'gamma', 'beta', 'meanR', 'invstdR', 'meanW', 'invstdW', 'runMean', 'runVar', 'out', 'sums', 'dgamma', 'dbeta'] as const;
type Bindings = Partial<Record<(typeof ORDER)[number], Tensor>>;

function dispatch(gpu: Gpu, entryPoint: string, u: Scalar[], b: Bindings, workgroups: number): void {
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint }, constants: { WG }, uniforms: u, bindings: ORDER.map((k) => b[k] ?? null) }, workgroups);
}

const elementGroups = (d: BatchNormDims, s: BatchSlice): number => Math.ceil((s.count * d.c * d.hw) / WG);

// x [N, C, H, W] or [N, F]; gamma, beta [C]; runningMean, runningVar [C] (updated in place)
//   -> y (x's shape, a different buffer from x), mean [C], invstd [C] (saved for backward)
export function batchNormForward(
  gpu: Gpu, x: Tensor, gamma: Tensor, beta: Tensor, runningMean: Tensor, runningVar: Tensor,
  y: Tensor, mean: Tensor, invstd: Tensor, params: BatchNormParams,
): void {
  const what = 'batchNorm.forward';
  const d = checkBatchNormOperands(what, x, { y }, { gamma, beta, runningMean, runningVar, mean, invstd });
  const slices = batchSlices(gpu, [x, y], what);
  const last = slices.length - 1;
  const f = (i: number): Flags => ({ first: i === 0, last: i === last, eps: params.eps, momentum: params.momentum });
  slices.forEach((s, i) => dispatch(gpu, 'sumX', uniforms(d, s, f(i)), { x: s.views[0]!, meanW: mean }, d.c));
  slices.forEach((s, i) => dispatch(gpu, 'sumSqDev', uniforms(d, s, f(i)), {
    x: s.views[0]!, meanR: mean, invstdW: invstd, runMean: runningMean, runVar: runningVar,
  }, d.c));
  for (const s of slices) {
    dispatch(gpu, 'normalize', uniforms(d, s, { mode: 0 }), {
      x: s.views[0]!, gamma, beta, meanR: mean, invstdR: invstd, out: s.views[1]!,
    }, elementGroups(d, s));
  }
}

// x [N, C, H, W] or [N, F]; gamma, beta, runningMean, runningVar [C] -> y (x's shape)
export function batchNormInference(
  gpu: Gpu, x: Tensor, gamma: Tensor, beta: Tensor, runningMean: Tensor, runningVar: Tensor,
  y: Tensor, params: Pick<BatchNormParams, 'eps'>,
): void {
  const what = 'batchNorm.inference';
  const d = checkBatchNormOperands(what, x, { y }, { gamma, beta, runningMean, runningVar });
  for (const s of batchSlices(gpu, [x, y], what)) {
    dispatch(gpu, 'normalize', uniforms(d, s, { mode: 1, eps: params.eps }), {
      x: s.views[0]!, gamma, beta, meanR: runningMean, invstdR: runningVar, out: s.views[1]!,
    }, elementGroups(d, s));
  }
}

// x, dy [N, C, H, W] or [N, F]; gamma, mean, invstd [C] (mean, invstd saved by forward)
//   -> dx (x's shape, written), dgamma, dbeta [C] (= or += by params.accumulate)
export function batchNormBackward(
  gpu: Gpu, x: Tensor, dy: Tensor, gamma: Tensor, mean: Tensor, invstd: Tensor,
  dx: Tensor, dgamma: Tensor, dbeta: Tensor, params: BatchNormBackwardParams,
): void {
  const what = 'batchNorm.backward';
  const d = checkBatchNormOperands(what, x, { dy, dx }, { gamma, mean, invstd, dgamma, dbeta });
  const slices = batchSlices(gpu, [x, dy, dx], what);
  // This batch's sums, kept apart from dgamma/dbeta: with accumulate those hold other gradients.
  const sums = gpu.empty([2 * d.c], 'f32', 'batchnorm.sums');
  slices.forEach((s, i) => dispatch(gpu, 'bwdSums', uniforms(d, s, { first: i === 0 }), { x: s.views[0]!, dy: s.views[1]!, meanR: mean, sums }, d.c));
  dispatch(gpu, 'bwdParams', uniforms(d, null, { acc: params.accumulate }), { invstdR: invstd, sums, dgamma, dbeta }, Math.ceil(d.c / WG));
  for (const s of slices) {
    dispatch(gpu, 'bwdInput', uniforms(d, s, {}), {
      x: s.views[0]!, dy: s.views[1]!, gamma, meanR: mean, invstdR: invstd, out: s.views[2]!, sums,
    }, elementGroups(d, s));
  }
  gpu.release(sums);
}
