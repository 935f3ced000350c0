// float64 reference: softmax cross-entropy with integer labels, logits [N, K], labels [N].
// With label smoothing eps the target is (1 - eps) onehot + eps / K (Szegedy et al. 2016):
//   loss = logsumexp(x) - (1 - eps) x[label] - (eps / K) sum_j x[j]
//   dlogits = softmax(x) - (1 - eps) onehot - eps / K
// A label outside [0, K) gives a NaN loss and a zero gradient row (as the GPU op).
import { logitsDims } from '../shapes/softmax_xent.ts';

function rowSoftmax(logits: Float64Array, row: number, k: number): { p: Float64Array; lse: number } {
  const x = logits.subarray(row * k, row * k + k);
  const m = x.reduce((a, v) => Math.max(a, v), -Infinity);
  let s = 0;
  for (const v of x) s += Math.exp(v - m);
  return { p: x.map((v) => Math.exp(v - m) / s), lse: m + Math.log(s) };
}

const valid = (label: number, k: number): boolean => Number.isInteger(label) && label >= 0 && label < k;

/** Per-sample losses [N]. */
export function softmaxXentForward(logits: Float64Array, labels: Int32Array, shape: readonly number[], smoothing = 0): Float64Array {
  const { n, k } = logitsDims(shape);
  const out = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    const label = labels[r]!;
    if (!valid(label, k)) { out[r] = NaN; continue; }
    let mean = 0;
    for (let j = 0; j < k; j++) mean += logits[r * k + j]!;
    mean /= k;
    out[r] = rowSoftmax(logits, r, k).lse - (1 - smoothing) * logits[r * k + label]! - smoothing * mean;
  }
  return out;
}

/** dlogits [N, K] = (softmax - target) * dlosses[n] (a number: the same for every sample). */
export function softmaxXentBackward(
  logits: Float64Array, labels: Int32Array, shape: readonly number[], dlosses: Float64Array | number, smoothing = 0,
): Float64Array {
  const { n, k } = logitsDims(shape);
  const d = new Float64Array(n * k);
  for (let r = 0; r < n; r++) {
    const label = labels[r]!;
    if (!valid(label, k)) continue;
    const g = typeof dlosses === 'number' ? dlosses : dlosses[r]!;
    const { p } = rowSoftmax(logits, r, k);
    for (let j = 0; j < k; j++) d[r * k + j] = (p[j]! - (1 - smoothing) * (j === label ? 1 : 0) - smoothing / k) * g;
  }
  return d;
}
