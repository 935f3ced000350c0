// float64 reference: top-1 / top-k hit counts. A label is in the top k when fewer than k
// classes have a STRICTLY larger logit (ties count for the label); labels outside [0, K) and
// NaN label logits never count.
import { logitsDims } from '../shapes/softmax_xent.ts';

export function topkCount(logits: Float64Array, labels: Int32Array, shape: readonly number[], k = 5): [number, number] {
  const { n, k: classes } = logitsDims(shape);
  let top1 = 0, topk = 0;
  for (let r = 0; r < n; r++) {
    const label = labels[r]!;
    if (label < 0 || label >= classes) continue;
    const v = logits[r * classes + label]!;
    if (Number.isNaN(v)) continue;
    let greater = 0;
    for (let j = 0; j < classes; j++) if (logits[r * classes + j]! > v) greater++;
    if (greater < 1) top1++;
    if (greater < k) topk++;
  }
  return [top1, topk];
}
