import { describe, expect, it } from 'vitest';
import { calibrate, predictRun, validate, type Calibration, type CommProbe, type MeasuredRun } from '../../bench/scaling-calibrate.ts';
import { modelProfile } from '../../bench/scaling-profile.ts';
import { harmonic } from '../../bench/scaling-sim.ts';
import { FitError } from '../../bench/scaling-model.ts';
import { modelByName } from '../../src/nn/models.ts';
import { makeRng } from '../../src/rng.ts';

const PROFILE = modelProfile(modelByName('small-cnn', [1, 28, 28], 10));
const S = PROFILE.gradBytes;
const TRUE: Calibration = {
  imagesPerSecPerPeer: 120, stragglerMean: 0.15, link: { latencyS: 0.004, bandwidthBytesPerS: 30e6 }, comm: 'latency+bandwidth',
  overheadS: 0.012, overheadPerPeerS: 0.006,
};

/** What N local peers (share 1/N) would measure if the simulator held, each time times (1 + noise * normal). */
function synthetic(cal: Calibration, peers: readonly number[], batches: readonly number[], noise = 0, seed = 1): MeasuredRun[] {
  const rng = makeRng(seed);
  const j = () => 1 + noise * rng.normal();
  return batches.flatMap((batch) => peers.map((n) => {
    const share = 1 / n;
    const t = batch / (n * cal.imagesPerSecPerPeer * share);
    const computeCriticalS = t * (1 + cal.stragglerMean * harmonic(n)) * j();
    const computeMeanS = t * (1 + cal.stragglerMean) * j();
    const allReduceS = n > 1 ? 2 * (n - 1) * (cal.link.latencyS + S / (n * cal.link.bandwidthBytesPerS)) * j() : 0;
    const stepS = computeCriticalS + allReduceS + (cal.overheadS + cal.overheadPerPeerS / share) * j();
    return { peers: n, batch, share, computeCriticalS, computeMeanS, allReduceS, stepS };
  }));
}

const rel = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);

describe('calibrating the scaling simulator', () => {
  it('recovers known parameters exactly from noiseless runs of 1..4 local peers at two batches', () => {
    const cal = calibrate(synthetic(TRUE, [1, 2, 3, 4], [48, 96]), S);
    expect(cal.comm).toBe('latency+bandwidth');
    expect(rel(cal.imagesPerSecPerPeer, TRUE.imagesPerSecPerPeer)).toBeLessThan(1e-9);
    expect(rel(cal.stragglerMean, TRUE.stragglerMean)).toBeLessThan(1e-9);
    expect(rel(cal.link.latencyS, TRUE.link.latencyS)).toBeLessThan(1e-9);
    expect(rel(cal.link.bandwidthBytesPerS, TRUE.link.bandwidthBytesPerS)).toBeLessThan(1e-9);
    expect(rel(cal.overheadS, TRUE.overheadS)).toBeLessThan(1e-9);
    expect(rel(cal.overheadPerPeerS, TRUE.overheadPerPeerS)).toBeLessThan(1e-9);
  });

  it('then predicts every run, held out or not, with no error', () => {
    const runs = synthetic(TRUE, [1, 2, 3, 4], [48, 96]);
    const v = validate(runs, PROFILE);
    expect(v.maxRelError).toBeLessThan(1e-9);
    expect(v.fixedSpeedMaxRelError).toBeLessThan(1e-9);
    expect(v.heldOutMaxRelError).not.toBeNull();
    expect(v.heldOutMaxRelError!).toBeLessThan(1e-9);
  });

  it('stays close with 2% noise, and its error then says so', () => {
    const runs = synthetic(TRUE, [1, 2, 3, 4, 6, 8], [48, 96], 0.02, 5);
    const cal = calibrate(runs, S);
    expect(rel(cal.imagesPerSecPerPeer, TRUE.imagesPerSecPerPeer)).toBeLessThan(0.05);
    expect(rel(cal.link.bandwidthBytesPerS, TRUE.link.bandwidthBytesPerS)).toBeLessThan(0.3);
    expect(Math.abs(cal.stragglerMean - TRUE.stragglerMean)).toBeLessThan(0.05);
    const v = validate(runs, PROFILE);
    expect(v.maxRelError).toBeGreaterThan(1e-4);
    expect(v.maxRelError).toBeLessThan(0.1);
  });

  it('a calibration from other parameters is told apart (the checks above are not vacuous)', () => {
    const other: Calibration = { ...TRUE, imagesPerSecPerPeer: 60, stragglerMean: 0.4, overheadS: 0.05 };
    const runs = synthetic(TRUE, [1, 2, 3, 4], [48]);
    expect(rel(calibrate(synthetic(other, [1, 2, 3, 4], [48]), S).stragglerMean, TRUE.stragglerMean)).toBeGreaterThan(0.5);
    const wrong = runs.map((r) => predictRun(other, r, PROFILE));
    expect(Math.max(...wrong.map((p, i) => rel(p, runs[i]!.stepS)))).toBeGreaterThan(0.3);
  });

  it('with one batch there is no held-out error; with no ring it refuses, saying why', () => {
    expect(validate(synthetic(TRUE, [1, 2, 4], [48]), PROFILE).heldOutMaxRelError).toBeNull();
    expect(() => calibrate(synthetic(TRUE, [1], [48]), S)).toThrow(FitError);
    expect(() => calibrate([], S)).toThrow(/no runs/);
    expect(() => calibrate([{ peers: 2, batch: 48, share: 0.5, computeCriticalS: NaN, computeMeanS: 1, allReduceS: 0.1, stepS: 2 }], S)).toThrow(/unusable/);
  });

  it('latency probes (a 1.5 KB gradient on the same rings) pin alpha and the bandwidth down from noisy runs of 2-4 peers', () => {
    const PROBE_S = modelProfile(modelByName('tiny-cnn', [1, 28, 28], 10)).gradBytes;
    const probesOf = (cal: Calibration, noise: number, seed: number): CommProbe[] => {
      const rng = makeRng(seed);
      return [2, 3, 4].map((n) => ({
        peers: n, gradBytes: PROBE_S, allReduceS: 2 * (n - 1) * (cal.link.latencyS + PROBE_S / (n * cal.link.bandwidthBytesPerS)) * (1 + noise * rng.normal()),
      }));
    };
    const exact = calibrate(synthetic(TRUE, [1, 2, 3, 4], [48]), S, probesOf(TRUE, 0, 1));
    expect(rel(exact.link.latencyS, TRUE.link.latencyS)).toBeLessThan(1e-9);
    expect(rel(exact.link.bandwidthBytesPerS, TRUE.link.bandwidthBytesPerS)).toBeLessThan(1e-9);
    // 3% noise on every time, the bench's ring sizes: over 20 draws, the worst alpha with probes.
    let worstWith = 0;
    let worstWithout = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const runs = synthetic(TRUE, [1, 2, 3, 4], [48, 96], 0.03, seed);
      const withProbes = calibrate(runs, S, probesOf(TRUE, 0.03, 100 + seed));
      worstWith = Math.max(worstWith, rel(withProbes.link.latencyS, TRUE.link.latencyS), rel(withProbes.link.bandwidthBytesPerS, TRUE.link.bandwidthBytesPerS));
      worstWithout = Math.max(worstWithout, rel(calibrate(runs, S).link.latencyS, TRUE.link.latencyS));
    }
    expect(worstWith).toBeLessThan(0.15);
    // The runs alone cannot tell latency from bandwidth as well: that is what the probes are for.
    expect(worstWithout).toBeGreaterThan(2 * worstWith);
    const v = validate(synthetic(TRUE, [1, 2, 3, 4], [48, 96]), PROFILE, probesOf(TRUE, 0, 1));
    expect(v.maxRelError).toBeLessThan(1e-9);
    expect(v.heldOutMaxRelError!).toBeLessThan(1e-9);
  });

  it('refuses a probe it cannot use, saying what it needs', () => {
    const runs = synthetic(TRUE, [1, 2], [48]);
    expect(() => calibrate(runs, S, [{ peers: 1, gradBytes: 1536, allReduceS: 0.01 }])).toThrow(/ring of 2 or more/);
    expect(() => calibrate(runs, S, [{ peers: 2, gradBytes: 1536, allReduceS: NaN }])).toThrow(FitError);
  });
});
