// Timing helpers: medians of repeated GPU work after warm-up, with repetitions chosen so
// each sample lasts long enough to be measured.

/** Geometric mean: how the benchmarks summarise ratios over shapes or models. */
export function geomean(xs: number[]): number {
  return Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Times `record` (which records GPU work) followed by `sync` (which waits for it). Returns the
 * median milliseconds per call over `samples` samples, after `warmup` untimed calls.
 */
export async function timeGpu(
  record: () => void, sync: () => Promise<void>, opts: { samples?: number; warmup?: number; minMs?: number } = {},
): Promise<number> {
  const { samples = 5, warmup = 2, minMs = 200 } = opts;
  for (let i = 0; i < warmup; i++) record();
  await sync();
  // One timed call tells how many repetitions make a sample of at least minMs.
  let t0 = performance.now();
  record();
  await sync();
  const one = performance.now() - t0;
  const reps = Math.max(1, Math.min(50, Math.ceil(minMs / Math.max(one, 1e-3))));
  const times: number[] = [];
  for (let s = 0; s < samples; s++) {
    t0 = performance.now();
    for (let r = 0; r < reps; r++) record();
    await sync();
    times.push((performance.now() - t0) / reps);
  }
  return median(times);
}
