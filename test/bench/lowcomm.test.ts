// The lowcomm bench's accounting: training time excludes the evaluations, and the time to a
// target is the first evaluation at or above it.
import { describe, expect, it } from 'vitest';
import { measuredRate, projectedSeconds, projectedTimeToTarget, timingSteps } from '../../bench/lowcomm-project.ts';
import { summarise, timeToTarget, type RunResult } from '../../bench/lowcomm-run.ts';
import type { LiveEvent } from '../../src/client/protocol.ts';

const spec = { profile: 'home' as const, syncEvery: 8, steps: 16, globalBatch: 128, optimizer: 'lars' as const, lr: 0.5, outerLr: 0.7, outerMomentum: 0.9, syncWarmup: 0, evalEvery: 8, evalSamples: 100, finalEvalSamples: 100, warmupSteps: 8, seed: 1 };
const step = (s: number, bytesPerImage = 1000): LiveEvent => ({ type: 'step', step: s, generation: 1, loss: 1, imagesPerSec: 1, peers: 4, timings: [], traffic: { innerSteps: 8, bytesPerImage } });
const ev = (s: number, top1: number): LiveEvent => ({ type: 'eval', step: s, top1, top5: 1, loss: 1, samples: 100 });

describe('lowcomm accounting', () => {
  it('takes evaluation time out of training time and finds the time to a target', () => {
    const events = [
      { at: 500, e: step(0) }, // before the ring formed: ignored
      { at: 11_000, e: step(8) }, { at: 14_000, e: ev(8, 0.2) }, // a 3 s evaluation
      { at: 24_000, e: step(16, 3000) }, { at: 25_000, e: ev(16, 0.3) },
    ];
    const r = summarise(spec, events, 1000, 30);
    expect(r.steps).toEqual([{ step: 8, seconds: 10, innerSteps: 8, bytesPerImage: 1000 }, { step: 16, seconds: 20, innerSteps: 8, bytesPerImage: 3000 }]);
    expect(r.evals).toEqual([{ step: 8, images: 1024, seconds: 10, top1: 0.2 }, { step: 16, images: 2048, seconds: 20, top1: 0.3 }]);
    expect(r.bytesPerImage).toBe(2000);
    expect(timeToTarget(r, 0.25)).toBe(20);
    expect(timeToTarget(r, 0.2)).toBe(10);
    expect(timeToTarget(r, 0.5)).toBeNull();
  });

  it('weighs bytes per image by images when sync steps (a warm-up) and rounds mix', () => {
    const sync: LiveEvent = { ...step(1, 100_000), traffic: { innerSteps: 1, bytesPerImage: 100_000 } } as LiveEvent;
    const r = summarise(spec, [{ at: 2000, e: sync }, { at: 3000, e: step(9, 10_000) }], 1000, 3);
    expect(r.bytesPerImage).toBe((100_000 + 8 * 10_000) / 9);
  });

  it('measures seconds per step from the first committed event to the last (start-up left out)', () => {
    const r = summarise(spec, [{ at: 9000, e: step(8) }, { at: 13_000, e: step(16) }, { at: 17_000, e: step(24) }], 1000, 20);
    expect(measuredRate(r)).toEqual({ secondsPerStep: 0.5, steps: 16 });
    expect(measuredRate(summarise(spec, [{ at: 9000, e: step(8) }], 1000, 20))).toBeNull();
    expect(timingSteps(1, 24)).toBe(24);
    expect(timingSteps(32, 24)).toBe(96);
  });

  it('projects the time to a target from a curve against steps and the measured rates, the sync warm-up at sync rate', () => {
    const curve = (syncEvery: number): RunResult => ({
      profile: 'lan', syncEvery, steps: [], bytesPerImage: 0, wallSeconds: 0,
      evals: [{ step: 40, images: 0, seconds: 1, top1: 0.2 }, { step: 80, images: 0, seconds: 2, top1: 0.31 }, { step: 120, images: 0, seconds: 3, top1: 0.35 }],
    });
    const sync = { secondsPerStep: 5, steps: 20 };
    const round = { secondsPerStep: 1, steps: 64 };
    expect(projectedSeconds(80, 32, sync, round)).toBe(32 * 5 + 48 * 1);
    expect(projectedSeconds(10, 32, sync, round)).toBe(50);
    expect(projectedTimeToTarget(curve(8), 0.3, 32, sync, round)).toBe(32 * 5 + 48);
    // a sync run has no warm-up of its own: all its steps at its rate
    expect(projectedTimeToTarget(curve(1), 0.3, 32, sync, sync)).toBe(400);
    expect(projectedTimeToTarget(curve(8), 0.4, 0, sync, round)).toBeNull();
  });
});
