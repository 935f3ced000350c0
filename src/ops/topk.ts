// Top-1 / top-k accuracy counts for evaluation: how many samples have their label in the top 1
// and in the top k. Ties count for the label: it is in the top k when fewer than k classes
// have a STRICTLY larger logit. Labels outside [0, K) and NaN label logits never count.
import code from '../../shaders/topk.wgsl?raw';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { type TopkParams, topkDims } from '../shapes/topk.ts';

// The shape rules live in src/shapes/topk.ts; re-exported for the ops namespace.
export type { TopkParams } from '../shapes/topk.ts';
export { topkDims } from '../shapes/topk.ts';

const KERNEL: Kernel = { name: 'topk', code };
const WG = 64;

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
