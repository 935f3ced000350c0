// Top-1 / top-k accuracy counts for evaluation: how many samples have their label in the top 1
// and in the top k. Ties count for the label: it is in the top k when fewer than k classes
// have a STRICTLY larger logit. Labels outside [0, K) and NaN label logits never count.
import code from '../../shaders/topk.wgsl?raw';
import type { TensorLike } from '../backend/engine.ts';
import { check } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { logitsDims } from './softmax_xent.ts';

const KERNEL: Kernel = { name: 'topk', code };
const WG = 64;

export interface TopkParams {
  /** The k of top-k (default 5). */
  k?: number;
  /** counts += instead of counts =, to total several evaluation batches before one readback. */
  accumulate?: boolean;
}

/** Checks every operand of topkCount (any engine's tensors); returns N, K and the k of top-k. */
export function topkDims(logits: TensorLike, labels: TensorLike, counts: TensorLike, params: TopkParams, what = 'topkCount'): { n: number; k: number; topk: number } {
  const { n, k } = logitsDims(logits.shape, what);
  const topk = params.k ?? 5;
  check(Number.isInteger(topk) && topk >= 1, what, () => `k must be a positive integer, got ${topk}`);
  check(labels.dtype === 'i32' && labels.size === n, what, () => `labels must be i32 [${n}], got ${labels.dtype} ${shapeStr(labels.shape)}`);
  check(counts.dtype === 'u32' && counts.size === 2, what, () => `counts must be u32 [2], got ${counts.dtype} ${shapeStr(counts.shape)}`);
  return { n, k, topk };
}

// logits [N, K], labels [N] i32 -> counts [2] u32: [#top-1 hits, #top-k hits]
export function topkCount(gpu: Gpu, logits: Tensor, labels: Tensor, counts: Tensor, params: TopkParams = {}): void {
  const { n, k, topk } = topkDims(logits, labels, counts, params);
  const ranks = gpu.empty([Math.max(1, n)], 'u32', 'topk.ranks');
  const uniforms: Scalar[] = [['u32', n], ['u32', k], ['u32', topk], ['u32', params.accumulate ? 1 : 0]];
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint: 'rank' }, constants: { WG }, uniforms, bindings: [logits, labels, ranks, null] }, n);
  gpu.dispatch({ kernel: { ...KERNEL, entryPoint: 'count' }, constants: { WG }, uniforms, bindings: [null, null, ranks, counts], workgroups: [1] });
  // Safe to release now: the dispatches above run before any later use of the pooled buffer.
  gpu.release(ranks);
}
