// needsFor (bench/scaling-predict.ts): what the 64-peer headline would need to reach a target,
// checked against the simulator itself on either side of each latency it reports.
import { describe, expect, it } from 'vitest';
import type { Calibration } from '../../bench/scaling-calibrate.ts';
import { LINK_KINDS, NEEDS_STRAGGLERS, cluster, needsFor, scenarios, systems } from '../../bench/scaling-predict.ts';
import { efficiency } from '../../bench/scaling-sim.ts';

const CAL: Calibration = {
  imagesPerSecPerPeer: 139, stragglerMean: 0.055, link: { latencyS: 0.0082, bandwidthBytesPerS: 123e6 }, comm: 'latency+bandwidth',
  overheadS: 0.011, overheadPerPeerS: 0,
};

function effAt(alphaMs: number, straggler: number): number {
  const s = scenarios(CAL).find((x) => x.key === 'resnet50-224')!;
  const link = LINK_KINDS.find((l) => l.key === '1g')!;
  const c = cluster(CAL, s, link, 64);
  return efficiency(
    { ...c, stragglerMean: straggler, link: { ...c.link, latencyS: link.oneWayS + alphaMs / 1000 } }, systems(CAL).current,
    { batch: 32_768, profile: s.profile },
  );
}

describe('what the 64-peer headline needs', () => {
  it('reports, per straggler mean, the largest latency per message that still reaches the target', () => {
    for (const target of [0.7, 0.85, 0.9]) {
      const n = needsFor(CAL, target);
      expect(n.alphaMsByStraggler.map((x) => x.straggler)).toEqual([...NEEDS_STRAGGLERS]);
      expect(n.noLatencyNoStraggler).toBeCloseTo(effAt(0, 0), 12);
      let last = Infinity;
      for (const { straggler, alphaMs } of n.alphaMsByStraggler) {
        if (alphaMs === null) {
          expect(effAt(0, straggler)).toBeLessThan(target);
          last = -1;
          continue;
        }
        expect(alphaMs).toBeLessThanOrEqual(last); // more stragglers leave less room for latency
        last = alphaMs;
        expect(effAt(alphaMs, straggler)).toBeGreaterThanOrEqual(target);
        if (alphaMs < CAL.link.latencyS * 1000) expect(effAt(alphaMs + 0.01, straggler)).toBeLessThan(target);
      }
    }
    // 0.7 is reached as fitted; 0.9 with the assumed stragglers (work stealing takes most of them
    // out) needs a latency per message well under the fitted 8.2 ms.
    expect(needsFor(CAL, 0.7).alphaMsByStraggler.at(-1)!.alphaMs).toBeCloseTo(CAL.link.latencyS * 1000, 9);
    const at90 = needsFor(CAL, 0.9).alphaMsByStraggler.at(-1)!.alphaMs;
    expect(at90).not.toBeNull();
    expect(at90!).toBeLessThan(CAL.link.latencyS * 500);
  });
});
