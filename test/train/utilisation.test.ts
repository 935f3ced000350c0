// Compute utilisation (src/train/utilisation.ts): per step, per peer and over a job, and where it
// is shown: the npm start progress line and the dashboard's line, folded from metrics records.
import { describe, expect, it } from 'vitest';
import { peerUtilisation, stepUtilisation, tallyStep, tallyUtilisation } from '../../src/train/utilisation.ts';
import { progressLine } from '../../src/train/progress.ts';
import { emptyModel, fold, utilisationLine } from '../../src/ui/dashboard.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';

const t = (computeMs: number) => ({ computeMs });

describe('compute utilisation', () => {
  it('is the ring\'s compute over its peer time, per step and per peer', () => {
    // Two peers, a 1 s step: one computed 800 ms, the other 500 ms (it waited for the first).
    expect(stepUtilisation([t(800), t(500)], 1000)).toBeCloseTo(0.65);
    expect(peerUtilisation([t(800), t(500)], 1000)).toEqual([0.8, 0.5]);
    expect(stepUtilisation([], 1000)).toBe(0);
    expect(stepUtilisation([t(10)], 0)).toBe(0);
    // A compute time past the wall time (clocks of different machines) is capped, never above 1.
    expect(stepUtilisation([t(1200)], 1000)).toBe(1);
  });

  it('over a job weighs each step by its peer time', () => {
    let tally = { computeMs: 0, peerMs: 0 };
    expect(tallyUtilisation(tally)).toBeNull();
    tally = tallyStep(tally, [t(900)], 1000); // 1 peer, 90%
    tally = tallyStep(tally, [t(300), t(300), t(300)], 1000); // 3 peers, 30%
    expect(tallyUtilisation(tally)).toBeCloseTo((900 + 900) / (1000 + 3000));
    expect(tallyStep(tally, [], 1000)).toBe(tally);
  });

  it('shows in the progress line and on the dashboard', () => {
    const line = progressLine({ step: 5, totalSteps: 10, epoch: 0.5, loss: 1, top1: null, imagesPerSec: 100, peers: 2, utilisation: 0.834 });
    expect(line).toMatch(/compute 83%/);
    expect(progressLine({ step: 0, totalSteps: 10, epoch: 0, loss: null, top1: null, imagesPerSec: null, utilisation: null })).toMatch(/compute -/);
    const m = emptyModel(64);
    expect(utilisationLine(m)).toBe('');
    const step = (n: number, computeMs: number[], wallMs: number): MetricRecord => ({
      type: 'step', time: n * 1000, step: n, generation: 1, ring: computeMs.length, loss: 1, imagesPerSec: 10, wallMs,
      traffic: { innerSteps: 1, bytesPerImage: 0 },
      peers: computeMs.map((c, i) => ({ peerId: `p${i}`, images: 8, computeMs: c, commMs: 0, waitMs: 0, checksum: 'x' })),
    });
    fold(m, step(1, [500, 500], 1000));
    fold(m, step(2, [900], 1000));
    expect(utilisationLine(m)).toBe('compute utilisation 90% (last step), 63% over 2 steps');
  });
});
