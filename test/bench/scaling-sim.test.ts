import { describe, expect, it } from 'vitest';
import { simulateChurn, type ChurnModel } from '../../bench/scaling-churn.ts';
import { allReduceTime, bucketsOf, exposedCommS, groupSize, latencyTerms } from '../../bench/scaling-collective.ts';
import { modelProfile } from '../../bench/scaling-profile.ts';
import { efficiency, meanInverseSlowdown, simulateStep, type ClusterModel, type SystemModel, type Workload } from '../../bench/scaling-sim.ts';
import { modelByName } from '../../src/nn/models.ts';
import { makeRng } from '../../src/rng.ts';
import { predictStep } from '../../bench/scaling-model.ts';
import { AUTO_MAX_INTERVAL, AUTO_PROBE } from '../../coordinator/steal-tuner.ts';

/** A two-layer model small enough to work out by hand. */
const TOY: Workload = {
  batch: 400,
  profile: {
    gradBytes: 1000, backwardShare: 0.5, layers: [{ name: 'a', node: 1, bytes: 600, readyFraction: 1 }, { name: 'b', node: 2, bytes: 400, readyFraction: 0.5 }],
  },
};
const CLUSTER: ClusterModel = {
  peers: 4, imagesPerSecPerPeer: 100, speedSigma: 0, stragglerMean: 0, share: 1, link: { latencyS: 0.01, bandwidthBytesPerS: 1000 }, seed: 1,
};
const RING: SystemModel = { topology: 'ring', overlap: false, bucketBytes: [Infinity], onLoss: 'abort', overheadS: 0.1, overheadPerPeerS: 0.05 };
const PLANNED: SystemModel = {
  topology: 'two-level', overlap: true, bucketBytes: [Infinity, 25e6, 4e6, 1e6], onLoss: 'rerun-slice', overheadS: 0.01, overheadPerPeerS: 0,
};

const R50 = modelProfile(modelByName('resnet50', [3, 224, 224], 1000));
const R50_64 = modelProfile(modelByName('resnet50', [3, 64, 64], 1000));
const SMALL = modelProfile(modelByName('small-cnn', [1, 28, 28], 10));

function randomCase(seed: number): { c: ClusterModel; w: Workload } {
  const rng = makeRng(seed);
  const profile = [R50, R50_64, SMALL][rng.int(3)]!;
  const peers = [1, 2, 3, 7, 16, 64, 100, 256, 1024][rng.int(9)]!;
  return {
    c: {
      peers, imagesPerSecPerPeer: 10 + 1000 * rng.next(), speedSigma: rng.next(), stragglerMean: 0.3 * rng.next(), share: 1,
      link: { latencyS: 0.05 * rng.next(), bandwidthBytesPerS: 1e6 * 10 ** (3 * rng.next()) }, seed,
    },
    w: { batch: [256, 8192, 32_768][rng.int(3)]!, profile },
  };
}

describe('scaling simulator: a hand-computed case', () => {
  it('flat ring, no overlap: compute + 2(N-1)(alpha + S/(N bw)) + o, efficiency T(1) / (N T(N))', () => {
    const t = simulateStep(CLUSTER, RING, TOY);
    expect(t.computeS).toBe(1); // 400 images over 4 peers at 100/s
    expect(t.allReduceS).toBeCloseTo(6 * (0.01 + 0.25), 12);
    expect(t.exposedCommS).toBeCloseTo(1.56, 12);
    expect(t.totalS).toBeCloseTo(1 + 1.56 + 0.15, 12);
    // Alone: 400/100 + 0.15 = 4.15 s a step; efficiency 4.15 / (4 * 2.71).
    expect(efficiency(CLUSTER, RING, TOY)).toBeCloseTo(4.15 / (4 * 2.71), 12);
  });

  it('with one bucket, a flat ring, no stragglers it is the closed form of bench/scaling-model.ts', () => {
    for (let seed = 1; seed <= 50; seed++) {
      const { c, w } = randomCase(seed);
      const quiet = { ...c, stragglerMean: 0, share: [1, 0.5, 0.25][seed % 3]! };
      const closed = predictStep(
        { imagesPerSecPerPeer: c.imagesPerSecPerPeer, latencyS: c.link.latencyS, bandwidthBytesPerS: c.link.bandwidthBytesPerS, overheadS: 0.15 }, c.peers,
        w.batch, w.profile.gradBytes, quiet.share,
      );
      expect(simulateStep(quiet, { ...RING, overheadS: 0.15, overheadPerPeerS: 0 }, w).totalS).toBeCloseTo(closed.totalS, 9);
    }
  });

  it('two levels on 4 peers: 2 x 2 groups, 2(alpha + S/(2 bw)) + 2(alpha + S/(4 bw))', () => {
    expect(groupSize(4)).toBe(2);
    expect(allReduceTime(CLUSTER.link, 'two-level', 4, 1000).totalS).toBeCloseTo(2 * 0.51 + 2 * 0.26, 12);
  });

  it('a two-level system is a flat ring below its twoLevelFrom, and half-precision frames halve the bytes', () => {
    const from = (n: number): SystemModel => ({ ...RING, topology: 'two-level', twoLevelFrom: n });
    expect(simulateStep(CLUSTER, from(16), TOY).allReduceS).toBeCloseTo(simulateStep(CLUSTER, RING, TOY).allReduceS, 12);
    expect(simulateStep(CLUSTER, from(4), TOY).allReduceS).toBeCloseTo(allReduceTime(CLUSTER.link, 'two-level', 4, 1000).totalS, 12);
    // 6 ring steps of alpha 0.01 and 500/4 bytes at 1000 B/s.
    expect(simulateStep(CLUSTER, { ...RING, wireScale: 0.5 }, TOY).allReduceS).toBeCloseTo(6 * (0.01 + 0.125), 12);
  });

  it('buckets of 400 bytes overlapped with a 0.5 s backward expose 1.37 s of 1.62', () => {
    const buckets = bucketsOf(TOY.profile.layers, 400);
    expect(buckets).toEqual([{ bytes: 400, readyFraction: 0.5 }, { bytes: 600, readyFraction: 1 }]);
    const time = (bytes: number) => allReduceTime(CLUSTER.link, 'ring', 4, bytes).totalS;
    // Bucket b (0.66 s) ready at 0.25 s ends at 0.91; bucket a (0.96 s) then ends at 1.87.
    expect(exposedCommS(buckets, time, 0.5, true)).toBeCloseTo(1.37, 12);
    expect(exposedCommS(buckets, time, 0.5, false)).toBeCloseTo(0.66 + 0.96, 12);
    const t = simulateStep(CLUSTER, { ...RING, overlap: true, bucketBytes: [400] }, TOY);
    expect(t.totalS).toBeCloseTo(1 + 1.37 + 0.15, 12);
  });

  it('lastBytes cuts the bucket all-reduced last: its first layers up to lastBytes go on their own', () => {
    const layers = [
      { bytes: 100, readyFraction: 1 }, { bytes: 200, readyFraction: 0.9 }, { bytes: 300, readyFraction: 0.6 }, { bytes: 400, readyFraction: 0.3 },
      { bytes: 800, readyFraction: 0.1 },
    ];
    // Plain: [1200 | 600], the first layers' 600 ready at the end.
    expect(bucketsOf(layers, 1000)).toEqual([{ bytes: 1200, readyFraction: 0.3 }, { bytes: 600, readyFraction: 1 }]);
    // Cut at 300: layers 0-1 (300 bytes) last; layer 2 (ready at 0.6) before them.
    expect(bucketsOf(layers, 1000, 300)).toEqual([{ bytes: 1200, readyFraction: 0.3 }, { bytes: 300, readyFraction: 0.6 }, { bytes: 300, readyFraction: 1 }]);
    // 250: only layer 0 fits; a last bucket that fits, or a first layer over the cap: no cut.
    expect(bucketsOf(layers, 1000, 250)).toEqual([{ bytes: 1200, readyFraction: 0.3 }, { bytes: 500, readyFraction: 0.9 }, { bytes: 100, readyFraction: 1 }]);
    expect(bucketsOf(layers, 1000, 600)).toEqual(bucketsOf(layers, 1000));
    expect(bucketsOf(layers, 1000, 50)).toEqual(bucketsOf(layers, 1000));
    // One bucket for all: the cut still applies.
    expect(bucketsOf(layers, Infinity, 100)).toEqual([{ bytes: 1700, readyFraction: 0.9 }, { bytes: 100, readyFraction: 1 }]);
    // A 10 s backward hides all but the last bucket: half the bytes exposed with the cut (4-peer ring).
    const time = (bytes: number) => allReduceTime(CLUSTER.link, 'ring', 4, bytes).totalS;
    expect(exposedCommS(bucketsOf(layers, 1000, 300), time, 10, true)).toBeCloseTo(6 * (0.01 + 300 / 4000), 12);
    expect(exposedCommS(bucketsOf(layers, 1000), time, 10, true)).toBeCloseTo(6 * (0.01 + 600 / 4000), 12);
  });

  it('a slice in micro-batches: each past the first costs microBatchS, and only the last one\'s backward overlaps the all-reduce', () => {
    const sys: SystemModel = { ...RING, overlap: true, bucketBytes: [400], microBatchS: 0.02 };
    const whole = simulateStep(CLUSTER, sys, TOY);
    // 100 images a peer in micro-batches of 30: 4 of them, 3 past the first at 0.02 s.
    const parts = simulateStep(CLUSTER, { ...sys, microBatchImages: 30 }, TOY);
    expect(parts.computeS).toBeCloseTo(1 + 3 * 0.02, 12);
    // The last micro-batch's backward: 0.5 s x 30/100 = 0.15 s; bucket b (0.66 s) ready at 0.075 ends at 0.735, then a (0.96 s): 1.695.
    expect(parts.backwardS).toBeCloseTo(0.15, 12);
    expect(parts.exposedCommS).toBeCloseTo(1.695 - 0.15, 12);
    expect(whole.exposedCommS).toBeCloseTo(1.37, 12);
    // A micro-batch that holds the whole slice changes nothing; at share 1/2 each costs twice.
    expect(simulateStep(CLUSTER, { ...sys, microBatchImages: 100 }, TOY)).toEqual(whole);
    expect(simulateStep({ ...CLUSTER, share: 0.5 }, { ...sys, microBatchImages: 30 }, TOY).computeS).toBeCloseTo(2 + 3 * 0.04, 12);
  });
});

describe('scaling simulator: invariants', () => {
  it('efficiency is at most 1, and exactly 1 for one peer with no stragglers', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const { c, w } = randomCase(seed);
      for (const s of [RING, PLANNED]) expect(efficiency(c, s, w)).toBeLessThanOrEqual(1 + 1e-12);
    }
    expect(efficiency({ ...CLUSTER, peers: 1 }, RING, TOY)).toBeCloseTo(1, 12);
  });

  it('efficiency never falls when the bandwidth grows', () => {
    for (let seed = 1; seed <= 60; seed++) {
      const { c, w } = randomCase(seed);
      for (const s of [RING, PLANNED]) {
        let last = 0;
        for (const bw of [1e5, 1e6, 1e7, 1e8, 1e9, 1e10]) {
          const e = efficiency({ ...c, link: { ...c.link, bandwidthBytesPerS: bw } }, s, w);
          expect(e).toBeGreaterThanOrEqual(last - 1e-12);
          last = e;
        }
      }
    }
  });

  it('two levels pay fewer latency terms than the flat ring for every composite N >= 16 (4(sqrt N - 1) for squares)', () => {
    for (let n = 16; n <= 1024; n++) {
      const prime = groupSize(n) === 1;
      if (prime) expect(latencyTerms('two-level', n)).toBe(latencyTerms('ring', n));
      else expect(latencyTerms('two-level', n)).toBeLessThan(latencyTerms('ring', n));
      const r = Math.sqrt(n);
      if (Number.isInteger(r)) expect(latencyTerms('two-level', n)).toBe(4 * (r - 1));
      // The same bytes per peer: 2(N-1)/N S, so with alpha = 0 both take the same time.
      const link = { latencyS: 0, bandwidthBytesPerS: 1e6 };
      expect(allReduceTime(link, 'two-level', n, 1e8).totalS).toBeCloseTo(allReduceTime(link, 'ring', n, 1e8).totalS, 6);
    }
    expect(latencyTerms('ring', 1024)).toBe(2046);
    expect(latencyTerms('two-level', 1024)).toBe(124);
  });

  it('overlap never makes a step slower, whatever the buckets', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const { c, w } = randomCase(seed);
      const buckets = [Infinity, 25e6, 1e6, 1e4];
      const off = simulateStep(c, { ...RING, bucketBytes: buckets }, w).totalS;
      const on = simulateStep(c, { ...RING, bucketBytes: buckets, overlap: true }, w).totalS;
      expect(on).toBeLessThanOrEqual(off + 1e-12);
    }
    // And it does hide something where backward is long next to the all-reduce.
    const c: ClusterModel = { ...CLUSTER, peers: 64, imagesPerSecPerPeer: 250, link: { latencyS: 2e-4, bandwidthBytesPerS: 125e6 } };
    const w = { batch: 32_768, profile: R50 };
    expect(simulateStep(c, { ...RING, overlap: true, bucketBytes: [25e6] }, w).exposedCommS).toBeLessThan(0.5 * simulateStep(c, RING, w).exposedCommS);
  });

  it('stragglers slow the step by (1 + mu H_N); identical and heterogeneous speeds give the same step (slices follow speed)', () => {
    const a = simulateStep({ ...CLUSTER, stragglerMean: 0.1 }, RING, TOY);
    expect(a.computeS).toBeCloseTo(1 + 0.1 * (1 + 1 / 2 + 1 / 3 + 1 / 4), 12);
    expect(simulateStep({ ...CLUSTER, speedSigma: 0.8 }, RING, TOY).totalS).toBeCloseTo(simulateStep(CLUSTER, RING, TOY).totalS, 12);
    // ...but heterogeneous peers alone would do as much, so the efficiency stays <= 1 and moves little.
    expect(efficiency({ ...CLUSTER, speedSigma: 0.8 }, RING, TOY)).toBeLessThanOrEqual(1);
  });

  it('work stealing auto: the faster way, with the tuner\'s probes of the other (AUTO_PROBE steps in AUTO_MAX_INTERVAL + 2 AUTO_PROBE)', () => {
    const p = AUTO_PROBE / (AUTO_MAX_INTERVAL + 2 * AUTO_PROBE);
    for (const mu of [0, 0.1, 1]) {
      const c = { ...CLUSTER, stragglerMean: mu };
      const on = simulateStep(c, { ...RING, steal: { fraction: 0.5, chunk: 2 }, microBatchS: 0.05 }, TOY);
      const off = simulateStep(c, { ...RING, microBatchS: 0.05 }, TOY);
      const auto = simulateStep(c, { ...RING, steal: { fraction: 0.5, chunk: 2, auto: true }, microBatchS: 0.05 }, TOY);
      const [best, other] = on.totalS < off.totalS ? [on, off] : [off, on];
      expect(auto.totalS).toBeCloseTo((1 - p) * best.totalS + p * other.totalS, 12);
      expect(auto.steals).toBe(best === on);
    }
    // No stragglers: stealing only costs (its micro-batches); many, with cheap micro-batches: it wins.
    expect(simulateStep(CLUSTER, { ...RING, steal: { fraction: 0.5, chunk: 2, auto: true }, microBatchS: 0.05 }, TOY).steals).toBe(false);
    expect(
      simulateStep({ ...CLUSTER, stragglerMean: 1 }, { ...RING, steal: { fraction: 0.5, chunk: 2, auto: true }, microBatchS: 0.001 }, TOY).steals,
    ).toBe(true);
  });

  it('work stealing: compute is the fluid time t / E[1 / s] (or the slowest fixed part) plus a chunk; the final grant bounds the overlap', () => {
    // E[1 / (1 + X)], X exponential of mean mu: against a sampled mean.
    const rng = makeRng(5);
    let sum = 0;
    for (let i = 0; i < 200_000; i++) sum += 1 / (1 - 0.1 * Math.log(1 - rng.next()));
    expect(meanInverseSlowdown(0.1)).toBeCloseTo(sum / 200_000, 3);
    expect(meanInverseSlowdown(0)).toBe(1);
    // TOY on 4 peers at 100 images/s: t = 1 s; chunks of 2 images (20 ms) hide the 20 ms claim round trip.
    const steal: SystemModel = { ...RING, steal: { fraction: 0.5, chunk: 2 } };
    const c = { ...CLUSTER, stragglerMean: 0.1 };
    expect(simulateStep(c, steal, TOY).computeS).toBeCloseTo(1 / meanInverseSlowdown(0.1) + 0.02, 12);
    expect(simulateStep(c, steal, TOY).computeS).toBeLessThan(simulateStep(c, RING, TOY).computeS);
    // Chunks of 1 image (10 ms) leave 10 ms of each 20 ms round trip exposed, for every chunk claimed
    // while the slowest fixed part runs, (1 - f) t mu H_4, and the first.
    const chunks = 1 + (0.5 * 1 * 0.1 * (1 + 1 / 2 + 1 / 3 + 1 / 4)) / 0.01;
    expect(simulateStep(c, { ...RING, steal: { fraction: 0.5, chunk: 1 } }, TOY).computeS).toBeCloseTo(1 / meanInverseSlowdown(0.1) + 0.01 + chunks * 0.01, 12);
    // A straggler beyond what the tail can absorb: the slowest fixed part (1 - f) t (1 + mu H_4) bounds the step.
    expect(
      simulateStep({ ...CLUSTER, stragglerMean: 3 }, { ...RING, steal: { fraction: 0.1, chunk: 2 } }, TOY).computeS,
    ).toBeCloseTo(0.9 * (1 + 3 * (1 + 1 / 2 + 1 / 3 + 1 / 4)) + 0.02, 12);
    // One peer: nothing to steal from.
    expect(simulateStep({ ...c, peers: 1 }, steal, TOY).computeS).toBeCloseTo(simulateStep({ ...c, peers: 1 }, RING, TOY).computeS, 12);
    // 64 peers on 1 Gb/s, ResNet-50: stealing takes the stragglers out and, with three quarters in
    // the tail, keeps the all-reduce behind the final grants' backward as much as before.
    const big: ClusterModel = { ...CLUSTER, peers: 64, imagesPerSecPerPeer: 250, stragglerMean: 0.05, link: { latencyS: 2e-4, bandwidthBytesPerS: 125e6 } };
    const w = { batch: 32_768, profile: R50 };
    const now = { ...PLANNED, bucketBytes: [25e6], wireScale: 0.5 };
    const with75 = { ...now, steal: { fraction: 0.75 } };
    expect(simulateStep(big, with75, w).computeS).toBeLessThan(simulateStep(big, now, w).computeS);
    expect(simulateStep(big, with75, w).exposedCommS).toBeLessThan(simulateStep(big, now, w).exposedCommS + 0.05);
    expect(efficiency(big, with75, w)).toBeGreaterThan(efficiency(big, now, w));
    // A quarter in the tail: the final grants are too short to hide it (more exposed).
    expect(simulateStep(big, { ...now, steal: { fraction: 0.25 } }, w).exposedCommS).toBeGreaterThan(simulateStep(big, now, w).exposedCommS);
  });

  it('refuses what it cannot simulate', () => {
    expect(() => simulateStep({ ...CLUSTER, peers: 0 }, RING, TOY)).toThrow(RangeError);
    expect(() => simulateStep({ ...CLUSTER, share: 0 }, RING, TOY)).toThrow(RangeError);
    expect(() => simulateStep({ ...CLUSTER, link: { latencyS: 0, bandwidthBytesPerS: 0 } }, RING, TOY)).toThrow(RangeError);
    expect(() => bucketsOf(TOY.profile.layers, 0)).toThrow(RangeError);
  });
});

describe('scaling simulator: churn', () => {
  const churn: ChurnModel = { meanSessionS: 600, detectS: 2, joinS: 3, steps: 3000 };
  const big: ClusterModel = {
    ...CLUSTER, peers: 64, imagesPerSecPerPeer: 250, speedSigma: 0.5, stragglerMean: 0.05, link: { latencyS: 2e-4, bandwidthBytesPerS: 125e6 },
  };

  it('a lost peer costs more when it aborts the step than when survivors re-run its slice', () => {
    for (const [peers, batch, profile] of [[16, 8192, R50], [64, 32_768, R50], [256, 32_768, R50_64], [1024, 8192, SMALL]] as const) {
      const c = { ...big, peers };
      const w = { batch, profile };
      const abort = simulateChurn(c, { ...PLANNED, onLoss: 'abort' }, w, churn);
      const rerun = simulateChurn(c, PLANNED, w, churn);
      expect(abort.meanStepS).toBeGreaterThan(rerun.meanStepS);
      expect(rerun.meanStepS).toBeGreaterThan(rerun.quietStepS);
      expect(abort.efficiency).toBeLessThan(rerun.efficiency);
    }
  });

  it('abort follows the restart formula (e^(rate T) - 1)(1/rate + detect) plus admissions', () => {
    const w = { batch: 32_768, profile: R50 };
    const t = simulateStep(big, RING, w).totalS;
    const rate = 64 / 600;
    const mean = Math.expm1(rate * t) * (1 / rate + 2);
    expect(simulateChurn(big, RING, w, churn).meanStepS).toBeCloseTo(mean + 3 * -Math.expm1(-rate * mean), 9);
  });

  it('with sessions far longer than a step, churn costs nothing; with losses faster than steps, the ring stalls', () => {
    const w = { batch: 8192, profile: R50 };
    for (const s of [RING, PLANNED]) {
      const r = simulateChurn(big, s, w, { ...churn, meanSessionS: 1e12 });
      expect(r.meanStepS / r.quietStepS).toBeCloseTo(1, 6);
      expect(r.efficiency).toBeCloseTo(efficiency(big, s, w), 6);
    }
    const slow = { ...big, peers: 1024, link: { latencyS: 0.025, bandwidthBytesPerS: 1.25e6 } };
    const stalled = simulateChurn(slow, RING, w, { ...churn, steps: 50 });
    expect(stalled.stalled).toBe(true);
    expect(stalled.efficiency).toBe(0);
  });
});

describe('model profiles from the real specs', () => {
  it('ResNet-50 at 224: 25.56M parameters, ~4.1 GMAC forward, backward 2x forward', () => {
    expect(R50.paramCount).toBe(25_557_032);
    expect(R50.forwardFlops / 2e9).toBeGreaterThan(4.0);
    expect(R50.forwardFlops / 2e9).toBeLessThan(4.2);
    expect(R50.backwardShare).toBeGreaterThan(0.66);
    expect(R50.backwardShare).toBeLessThan(0.667);
  });

  it('layers tile the gradient buffer; backward completes them last to first', () => {
    for (const p of [R50, R50_64, SMALL]) {
      expect(p.layers.reduce((a, l) => a + l.bytes, 0)).toBe(p.gradBytes);
      expect(p.layers[0]!.readyFraction).toBe(1);
      for (let i = 1; i < p.layers.length; i++) expect(p.layers[i]!.readyFraction).toBeLessThanOrEqual(p.layers[i - 1]!.readyFraction);
      expect(p.layers.at(-1)!.readyFraction).toBeLessThan(0.01);
    }
    // 64x64 images: about a third of the 224x224 FLOPs (the first stage at 32x32 instead of 56x56).
    expect(R50_64.forwardFlops / R50.forwardFlops).toBeGreaterThan(0.25);
    expect(R50_64.forwardFlops / R50.forwardFlops).toBeLessThan(0.4);
  });
});
