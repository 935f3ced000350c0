// Per-channel mean and standard deviation of pixel/255 over many images (float64 sums).

import type { RawImage } from './image.ts';

export interface ChannelStats {
  add(img: RawImage): void;
  /** Mean and population std per channel; std 1 where nothing varied (so normalising stays finite). */
  result(): { mean: number[]; std: number[] };
}

export function makeChannelStats(channels: number): ChannelStats {
  const sum = new Float64Array(channels);
  const sq = new Float64Array(channels);
  let n = 0;
  return {
    add(img) {
      const c = img.channels;
      const d = img.data;
      for (let k = 0; k < c; k++) {
        let s = 0;
        let q = 0;
        for (let i = k; i < d.length; i += c) {
          s += d[i];
          q += d[i] * d[i];
        }
        sum[k] += s / 255;
        sq[k] += q / (255 * 255);
      }
      n += d.length / c;
    },
    result() {
      const mean = Array.from(sum, (s) => (n > 0 ? s / n : 0));
      const std = Array.from(sq, (q, k) => {
        const v = n > 0 ? q / n - mean[k] * mean[k] : 0;
        return v > 1e-12 ? Math.sqrt(v) : 1;
      });
      return { mean, std };
    },
  };
}
