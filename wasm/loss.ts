// Softmax cross-entropy and top-k counting for logits [N, K] and i32 labels [N], as
// shaders/softmax_xent.wgsl and shaders/topk.wgsl define them (row max stabilises exp; a
// label outside [0, K) gives a NaN loss and a zero dlogits row; top-k ties count for the label).

@inline function f(p: usize, i: i32): f32 {
  return load<f32>(p + <usize>i * 4);
}

/**
 * losses[n], dlogits[n, :] = (softmax - target) * scale, total[0] = sum of losses in order;
 * target = (1 - eps) onehot + eps / K (label smoothing; eps = 0: plain, bit for bit).
 */
export function softmaxXent(logits: usize, labels: usize, dlogits: usize, losses: usize, total: usize, n: i32, k: i32, scale: f32, eps: f32): void {
  const hit: f32 = <f32>1 - eps;
  const spread: f32 = eps / <f32>k;
  let sum: f64 = 0;
  for (let r = 0; r < n; r++) {
    const row = logits + <usize>r * k * 4;
    const drow = dlogits + <usize>r * k * 4;
    let m = f(row, 0);
    for (let j = 1; j < k; j++) m = max(m, f(row, j));
    let s: f32 = 0;
    for (let j = 0; j < k; j++) s += Mathf.exp(f(row, j) - m);
    const label = load<i32>(labels + <usize>r * 4);
    const valid = label >= 0 && label < k;
    let c: f32 = 0;
    for (let j = 0; j < k; j++) c += f(row, j) - m;
    const inv = <f32>1 / s;
    for (let j = 0; j < k; j++) {
      const g = Mathf.exp(f(row, j) - m) * inv - (j == label ? hit : <f32>0) - spread;
      store<f32>(drow + <usize>j * 4, valid ? g * scale : 0);
    }
    const uniform: f32 = eps > 0 ? eps * c / <f32>k : 0;
    const loss: f32 = valid ? Mathf.log(s) - hit * (f(row, label) - m) - uniform : NaN;
    store<f32>(losses + <usize>r * 4, loss);
    sum += <f64>loss;
  }
  store<f32>(total, <f32>sum);
}

/** counts[0] (+)= #(rank < 1), counts[1] (+)= #(rank < topk); rank = #classes strictly above the label. */
export function topkCount(logits: usize, labels: usize, counts: usize, n: i32, k: i32, topk: i32, accumulate: bool): void {
  let c1: u32 = 0, ck: u32 = 0;
  for (let r = 0; r < n; r++) {
    const label = load<i32>(labels + <usize>r * 4);
    if (label < 0 || label >= k) continue;
    const row = logits + <usize>r * k * 4;
    const v = f(row, label);
    if (v != v) continue;
    let greater = 0;
    for (let j = 0; j < k; j++) if (f(row, j) > v) greater++;
    if (greater < 1) c1++;
    if (greater < topk) ck++;
  }
  store<u32>(counts, accumulate ? load<u32>(counts) + c1 : c1);
  store<u32>(counts, accumulate ? load<u32>(counts, 4) + ck : ck, 4);
}
