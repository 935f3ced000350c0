// Per-channel sums of pixel/255 and its square over the images of one shard. The build
// journal keeps them per shard, so a resumed build's mean and std are the same numbers,
// bit for bit, as an uninterrupted build's: shards are summed in order at the end either way.

import type { RawImage } from '../../src/data/image.ts';

export interface StatSums {
  readonly sum: number[];
  readonly sq: number[];
  /** Pixels (per channel) counted. */
  n: number;
}

export const emptySums = (channels: number): StatSums => ({ sum: new Array<number>(channels).fill(0), sq: new Array<number>(channels).fill(0), n: 0 });

export function addImage(s: StatSums, img: RawImage): void {
  const c = img.channels;
  const d = img.data;
  for (let k = 0; k < c; k++) {
    let a = 0;
    let q = 0;
    for (let i = k; i < d.length; i += c) {
      a += d[i];
      q += d[i] * d[i];
    }
    s.sum[k] += a / 255;
    s.sq[k] += q / (255 * 255);
  }
  s.n += d.length / c;
}

/** Mean and population std per channel over all the shards' sums; std 1 where nothing varied. */
export function meanStd(parts: readonly StatSums[], channels: number): { mean: number[]; std: number[] } {
  const total = emptySums(channels);
  for (const p of parts) {
    for (let k = 0; k < channels; k++) {
      total.sum[k] += p.sum[k];
      total.sq[k] += p.sq[k];
    }
    total.n += p.n;
  }
  const n = total.n;
  const mean = total.sum.map((s) => (n > 0 ? s / n : 0));
  const std = total.sq.map((q, k) => {
    const v = n > 0 ? q / n - mean[k] * mean[k] : 0;
    return v > 1e-12 ? Math.sqrt(v) : 1;
  });
  return { mean, std };
}
