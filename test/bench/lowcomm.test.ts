// The lowcomm bench's accounting: training time excludes the evaluations, and the time to a
// target is the first evaluation at or above it.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { report } from '../../bench/lowcomm-report.ts';
import { measuredRate, projectedSeconds, projectedTimeToTarget, timingSteps } from '../../bench/lowcomm-project.ts';
import { summarise, timeToTarget, type RunResult } from '../../bench/lowcomm-run.ts';
import type { LiveEvent } from '../../src/protocol/messages.ts';

const spec = {
  profile: 'home' as const, syncEvery: 8, steps: 16, globalBatch: 128, optimizer: 'lars' as const, lr: 0.5, outerLr: 0.7, outerMomentum: 0.9, syncWarmup: 0,
  evalEvery: 8, evalSamples: 100, finalEvalSamples: 100, warmupSteps: 8, seed: 1,
};
const step = (s: number, bytesPerImage = 1000): LiveEvent => ({
  type: 'step', step: s, generation: 1, loss: 1, imagesPerSec: 1, peers: 4, timings: [], traffic: { innerSteps: 8, bytesPerImage },
});
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
      evals: [
        { step: 40, images: 0, seconds: 1, top1: 0.2 }, { step: 80, images: 0, seconds: 2, top1: 0.31 }, { step: 120, images: 0, seconds: 3, top1: 0.35 },
      ],
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

describe('lowcomm report', () => {
  it('gives speedups at sync final minus 2 points, and at the highest top-1 both sync and the best H reach', async () => {
    const curve = (syncEvery: number, tops: number[]): RunResult => ({
      profile: 'lan', syncEvery, steps: [], bytesPerImage: syncEvery === 1 ? 1000 : 1000 / syncEvery, wallSeconds: 0,
      evals: tops.map((top1, i) => ({ step: 100 * (i + 1), images: 0, seconds: 0, top1 })),
    });
    const timed = (syncEvery: number, secondsPerStep: number): RunResult => ({
      profile: 'home', syncEvery, evals: [], bytesPerImage: 0, wallSeconds: 0,
      steps: [0, 1, 2].map((i) => ({ step: syncEvery * (i + 1), seconds: 10 + i * syncEvery * secondsPerStep, innerSteps: syncEvery, bytesPerImage: 0 })),
    });
    const settings = {
      steps: 400, batch: 128, optimizer: 'sgd' as const, wire: 'f32', lr: 0.04, warmupSteps: 8, outerLr: 1, outerMomentum: 0, syncWarmup: 0, evalEvery: 100,
      evalSamples: 100, finalEvalSamples: 100, timeSteps: 24, full: false, profiles: ['home' as const, 'wifi' as const], hs: [8, 32], peers: 4,
      model: 'small-cnn', dataset: 'cifar10',
    };
    const accuracy = { 'lan/1': curve(1, [0.3, 0.5, 0.58, 0.6]), 'lan/8': curve(8, [0.25, 0.45, 0.55, 0.57]), 'lan/32': curve(32, [0.2, 0.4, 0.5, 0.52]) };
    const timing: Record<string, RunResult> = {};
    for (const p of ['home', 'wifi']) {
      timing[`${p}/1`] = timed(1, p === 'home' ? 5 : 2);
      timing[`${p}/8`] = timed(8, 1);
      timing[`${p}/32`] = timed(32, 0.5);
    }
    const dir = await mkdtemp(join(tmpdir(), 'lowcomm-report-'));
    try {
      const s = report({ settings, accuracy, timing }, dir);
      // target 0.58: sync at step 300, neither H reaches it
      expect(s).toMatchObject({ speedup_home: 0, speedup_wifi: 0, best_h: 8, target_top1: 58, bytes_per_image_best: 125 });
      expect(s.top1_gap).toBeCloseTo(3, 6);
      // the same top-1: 0.57 (H = 8's best): sync reaches it at step 300, H = 8 at 400
      expect(s.same_top1).toBe(57);
      expect(s.speedup_home_same_top1).toBeCloseTo((300 * 5) / (400 * 1), 3);
      expect(s.speedup_wifi_same_top1).toBeCloseTo((300 * 2) / (400 * 1), 3);
      expect(JSON.parse(await readFile(join(dir, 'lowcomm.json'), 'utf8')).summary).toEqual(s);
      // --auto: whole runs timed by the clock, against the best fixed mode on each profile (on lan: sync's accuracy run).
      const clocked = (profile: 'home' | 'wifi' | 'lan', tops: [number, number][]): RunResult => ({
        profile, syncEvery: 'auto', choices: [{ step: 4, h: 8 }], steps: [], bytesPerImage: 0, wallSeconds: 0,
        evals: tops.map(([seconds, top1], i) => ({ step: 100 * (i + 1), images: 0, seconds, top1 })),
      });
      const lanSync = { ...accuracy['lan/1'], evals: accuracy['lan/1'].evals.map((e, i) => ({ ...e, seconds: 100 * (i + 1) })) };
      const auto = { home: clocked('home', [[500, 0.5], [1000, 0.59]]), wifi: clocked('wifi', [[200, 0.4], [400, 0.5]]), lan: clocked('lan', [[150, 0.58]]) };
      const a = report({ settings, accuracy: { ...accuracy, 'lan/1': lanSync }, timing, auto }, dir);
      // home: only sync reaches 0.58 (step 300 at 5 s a step: 1500 s); auto in 1000 s. wifi: auto never does. lan: sync's run at 300 s, auto 150 s.
      expect(a).toMatchObject({ auto_vs_best_home: 1.5, auto_vs_best_wifi: 0, auto_vs_sync_lan: 2 });
      expect((a.auto as Record<string, unknown>).home).toEqual({ seconds: 1000, best: { h: 1, seconds: 1500 }, choices: [{ step: 4, h: 8 }], top1: 59 });
      const saved = JSON.parse(await readFile(join(dir, 'lowcomm.json'), 'utf8'));
      expect(saved.auto.lan.choices).toEqual([{ step: 4, h: 8 }]);
      expect(saved.summary).toEqual(a);
      expect(() => projectedTimeToTarget(
        auto.home, 0.5, 0, { secondsPerStep: 1, steps: 2 }, { secondsPerStep: 1, steps: 2 },
      )).toThrow(/measured, not projected/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
