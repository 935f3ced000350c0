// Shape rules of the top-1 / top-k accuracy counts: params and the check of every operand.
// Pure: shared by the WebGPU kernel (src/ops/topk.ts), the wasm engine and the float64 reference.
import { check } from '../errors.ts';
import { type Shaped, shapeStr } from './shape.ts';
import { logitsDims } from './softmax_xent.ts';

export interface TopkParams {
  /** The k of top-k (default 5). */
  k?: number;
  /** counts += instead of counts =, to total several evaluation batches before one readback. */
  accumulate?: boolean;
}

/** Checks every operand of topkCount (any engine's tensors); returns N, K and the k of top-k. */
export function topkDims(logits: Shaped, labels: Shaped, counts: Shaped, params: TopkParams, what = 'topkCount'): { n: number; k: number; topk: number } {
  const { n, k } = logitsDims(logits.shape, what);
  const topk = params.k ?? 5;
  check(Number.isInteger(topk) && topk >= 1, what, () => `k must be a positive integer, got ${topk}`);
  check(labels.dtype === 'i32' && labels.size === n, what, () => `labels must be i32 [${n}], got ${labels.dtype} ${shapeStr(labels.shape)}`);
  check(counts.dtype === 'u32' && counts.size === 2, what, () => `counts must be u32 [2], got ${counts.dtype} ${shapeStr(counts.shape)}`);
  return { n, k, topk };
}
