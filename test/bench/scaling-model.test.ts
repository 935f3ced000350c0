import { describe, expect, it } from 'vitest';
import { FitError, fitStepModel, predictStep, ringBytesPerPeer, scalingEfficiency, type RunFigures, type StepModel } from '../../bench/scaling-model.ts';
import { makeRng } from '../../src/rng.ts';

const TRUE: StepModel = { imagesPerSecPerPeer: 180, latencyS: 0.004, bandwidthBytesPerS: 40e6, overheadS: 0.035 };
const S = 1.6e6;
const B = 48;

/** What a run of N peers would measure if the model held, times (1 + noise * a standard normal). */
function synthetic(m: StepModel, peers: readonly number[], noise = 0, seed = 1, shared = false): RunFigures[] {
  const rng = makeRng(seed);
  const jitter = () => 1 + noise * rng.normal();
  return peers.map((n) => {
    const share = shared ? 1 / n : 1;
    const t = predictStep(m, n, B, S, share);
    const computeS = t.computeS * jitter();
    const commS = t.commS * jitter();
    return { peers: n, batch: B, gradBytes: S, share, computeS, commS, stepS: computeS + commS + t.overheadS * jitter() };
  });
}

const rel = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);

describe('step-time model', () => {
  it('T(N) is compute + 2(N-1)(alpha + S/(N bw)) + o', () => {
    const t = predictStep(TRUE, 4, B, S);
    expect(t.computeS).toBeCloseTo(B / (4 * 180), 12);
    expect(t.commS).toBeCloseTo(6 * (0.004 + S / (4 * 40e6)), 12);
    expect(t.totalS).toBeCloseTo(t.computeS + t.commS + 0.035, 12);
    expect(predictStep(TRUE, 1, B, S).commS).toBe(0);
    expect(ringBytesPerPeer(4, 100)).toBe(150);
  });

  it('peers sharing one machine compute B / c whatever N', () => {
    for (const n of [1, 2, 4]) expect(predictStep(TRUE, n, B, S, 1 / n).computeS).toBeCloseTo(B / 180, 12);
    expect(() => predictStep(TRUE, 2, B, S, 0)).toThrow(RangeError);
  });

  it('efficiency is 1 for one peer and T(1) / (N T(N)) otherwise; falls as N grows', () => {
    expect(scalingEfficiency(TRUE, 1, B, S)).toBeCloseTo(1, 12);
    const e8 = scalingEfficiency(TRUE, 8, 32768, S);
    expect(e8).toBeCloseTo(predictStep(TRUE, 1, 32768, S).totalS / (8 * predictStep(TRUE, 8, 32768, S).totalS), 12);
    expect(scalingEfficiency(TRUE, 64, 32768, S)).toBeLessThan(e8);
    expect(() => predictStep(TRUE, 0, B, S)).toThrow(RangeError);
  });

  it('the fit recovers known constants exactly from noiseless runs of 1..4 peers', () => {
    const fit = fitStepModel(synthetic(TRUE, [1, 2, 3, 4]));
    expect(fit.comm).toBe('latency+bandwidth');
    expect(rel(fit.model.imagesPerSecPerPeer, TRUE.imagesPerSecPerPeer)).toBeLessThan(1e-9);
    expect(rel(fit.model.latencyS, TRUE.latencyS)).toBeLessThan(1e-9);
    expect(rel(fit.model.bandwidthBytesPerS, TRUE.bandwidthBytesPerS)).toBeLessThan(1e-9);
    expect(rel(fit.model.overheadS, TRUE.overheadS)).toBeLessThan(1e-9);
    expect(fit.rmsS).toBeLessThan(1e-12);
  });

  it('the fit recovers c, the speed of a peer alone, from peers sharing one machine', () => {
    const fit = fitStepModel(synthetic(TRUE, [1, 2, 3, 4], 0, 1, true));
    expect(rel(fit.model.imagesPerSecPerPeer, TRUE.imagesPerSecPerPeer)).toBeLessThan(1e-9);
    expect(rel(fit.model.overheadS, TRUE.overheadS)).toBeLessThan(1e-9);
    expect(fit.rmsS).toBeLessThan(1e-12);
  });

  it('the fit stays close with 2% noise and more ring sizes', () => {
    const fit = fitStepModel(synthetic(TRUE, [1, 2, 3, 4, 6, 8, 12, 16], 0.02, 7));
    expect(rel(fit.model.imagesPerSecPerPeer, TRUE.imagesPerSecPerPeer)).toBeLessThan(0.05);
    expect(rel(fit.model.bandwidthBytesPerS, TRUE.bandwidthBytesPerS)).toBeLessThan(0.3);
    expect(rel(fit.model.latencyS, TRUE.latencyS)).toBeLessThan(0.3);
    expect(rel(fit.model.overheadS, TRUE.overheadS)).toBeLessThan(0.3);
  });

  it('a fit from other constants tells them apart (the check above is not vacuous)', () => {
    const other: StepModel = { imagesPerSecPerPeer: 90, latencyS: 0.02, bandwidthBytesPerS: 10e6, overheadS: 0.1 };
    const fit = fitStepModel(synthetic(other, [1, 2, 3, 4]));
    expect(rel(fit.model.imagesPerSecPerPeer, TRUE.imagesPerSecPerPeer)).toBeGreaterThan(0.4);
    expect(rel(fit.model.latencyS, other.latencyS)).toBeLessThan(1e-9);
  });

  it('pins alpha to 0 when the two-term solution would make it negative', () => {
    // All-reduce times that fall with N at fixed bytes per peer imply a negative latency.
    const runs = synthetic({ ...TRUE, latencyS: 0 }, [1, 2, 3, 4]);
    runs[3] = { ...runs[3]!, commS: runs[3]!.commS * 0.7, stepS: runs[3]!.stepS - runs[3]!.commS * 0.3 };
    const fit = fitStepModel(runs);
    expect(fit.comm).toBe('bandwidth only');
    expect(fit.model.latencyS).toBe(0);
    expect(fit.model.bandwidthBytesPerS).toBeGreaterThan(0);
  });

  it('with a single ring size fits the bandwidth alone', () => {
    const fit = fitStepModel(synthetic(TRUE, [1, 3]));
    expect(fit.comm).toBe('bandwidth only');
    expect(fit.model.latencyS).toBe(0);
  });

  it('refuses runs it cannot fit, saying why', () => {
    expect(() => fitStepModel([])).toThrow(FitError);
    expect(() => fitStepModel(synthetic(TRUE, [1]))).toThrow(/no run with 2 or more peers/);
    expect(() => fitStepModel([{ peers: 2, batch: B, gradBytes: S, share: 1, computeS: NaN, commS: 0.1, stepS: 1 }])).toThrow(/unusable/);
    expect(() => fitStepModel([{ peers: 2, batch: B, gradBytes: S, share: 2, computeS: 1, commS: 0.1, stepS: 2 }])).toThrow(/share/);
  });
});
