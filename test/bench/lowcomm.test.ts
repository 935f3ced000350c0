// The lowcomm bench's accounting: training time excludes the evaluations, and the time to a
// target is the first evaluation at or above it.
import { describe, expect, it } from 'vitest';
import { summarise, timeToTarget } from '../../bench/lowcomm-run.ts';
import type { LiveEvent } from '../../src/client/protocol.ts';

const spec = { profile: 'home' as const, syncEvery: 8, steps: 16, globalBatch: 128, lr: 0.5, outerLr: 0.7, outerMomentum: 0.9, syncWarmup: 0, evalEvery: 8, evalSamples: 100, seed: 1 };
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
});
