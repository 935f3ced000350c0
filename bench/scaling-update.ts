// What each peer does after every all-reduce, measured on this machine's CPU for any model: the
// host LARS step (src/optim/host.ts, float64, the one implementation that keeps a mixed ring's
// weights bitwise equal) and the weight checksum every step result carries
// (src/client/checksum.ts). The scaling bench's fitted overhead holds them for the small CNN it
// trains; the predictions for ResNet-50 add what its 65x more parameters cost on top.
import { weightChecksum } from '../src/client/checksum.ts';
import { hostOptimizerStep } from '../src/optim/host.ts';
import { parseOptimizerConfig } from '../src/optim/config.ts';
import type { ParamSegment } from '../src/optim/types.ts';
import type { ModelProfile } from './scaling-profile.ts';
import { median } from './timing.ts';

/** One segment per layer of the profile (weights adapted and decayed, as LARS treats conv and linear weights). */
export function segmentsOf(p: Pick<ModelProfile, 'layers'>): { segments: ParamSegment[]; floats: number } {
  let offset = 0;
  const segments = p.layers.map((l) => {
    const length = Math.ceil(l.bytes / 4);
    const s: ParamSegment = { name: l.name, offset, length, adapt: true, decay: true };
    offset += length;
    return s;
  });
  return { segments, floats: offset };
}

/** Seconds of one host step plus one checksum for `p`'s parameters: the median of `reps` after one warm-up. */
export function hostUpdateSeconds(p: Pick<ModelProfile, 'layers'>, reps = 3): number {
  const { segments, floats } = segmentsOf(p);
  const w = new Float32Array(floats), v = new Float32Array(floats), G = new Float32Array(floats);
  for (let i = 0; i < floats; i++) {
    w[i] = (((i * 7919) % 1000) - 500) * 1e-4;
    G[i] = (((i * 104_729) % 1000) - 500) * 2e-5;
  }
  const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.1, totalSteps: 1000 });
  const times: number[] = [];
  for (let r = 0; r <= reps; r++) {
    const t0 = performance.now();
    hostOptimizerStep(cfg, segments, { w, v, G, t: r, gradScale: 1 / 1024 });
    weightChecksum(w);
    if (r > 0) times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}
