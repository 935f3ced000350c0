// Where a step's time went (src/ui/step-split.ts): the critical path's compute / exposed
// all-reduce / overhead from a step record's per-peer timings, with the awkward records (fields
// missing, a ring of one, reused images, values a metrics file should not hold), and its chart.
import { describe, expect, it } from 'vitest';
import type { PeerStepTiming } from '../../src/protocol/messages.ts';
import { median } from '../../src/stats.ts';
import { splitSummary, stepSplit, stepSplitSvg, type StepSplit } from '../../src/ui/step-split.ts';

const t = (peerId: string, computeMs: number, commMs: number, extra: Partial<PeerStepTiming> = {}): PeerStepTiming =>
  ({ peerId, images: 8, computeMs, commMs, waitMs: 3, ...extra });
/** The texts of the <text class="cls"> elements, in order. */
const texts = (svg: string, cls: string) => [...svg.matchAll(new RegExp(`<text class="${cls}"[^>]*>([^<]*)<`, 'g'))].map((m) => m[1]!);
/** Each <rect class="cls"> as {x, y, w, h}. */
const rects = (svg: string, cls: string) => [
  ...svg.matchAll(new RegExp(`<rect class="${cls}" x="([\\d.]+)" y="([\\d.]+)" width="([\\d.]+)" height="([\\d.]+)"`, 'g')),
]
  .map((m) => ({ x: Number(m[1]), y: Number(m[2]), w: Number(m[3]), h: Number(m[4]) }));

describe('median', () => {
  it('middle value, mean of the middle two, 0 for none; does not reorder its input', () => {
    const xs = [5, 1, 3];
    expect(median(xs)).toBe(3);
    expect(xs).toEqual([5, 1, 3]);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(median([])).toBe(0);
  });
});

describe('stepSplit', () => {
  it('every member reported: the slowest compute, the median exposed all-reduce, overhead and hidden part', () => {
    const s = stepSplit([
      t('a', 100, 60, { exposedCommMs: 10, overheadMs: 5 }),
      t('b', 120, 50, { exposedCommMs: 30, overheadMs: 7 }),
      t('c', 90, 70, { exposedCommMs: 20, overheadMs: 6 }),
    ]);
    // hidden per member: 50, 20, 50.
    expect(s).toEqual({ computeMs: 120, exposedCommMs: 20, hiddenCommMs: 50, overheadMs: 6, measured: true, peers: 3, reusedImages: 0, bound: 'compute' });
  });

  it('an older job (no split reported): the whole all-reduce stands in for the exposed part; no overhead, nothing hidden', () => {
    const s = stepSplit([t('a', 40, 90), t('b', 35, 80)])!;
    expect(s).toMatchObject({ computeMs: 40, exposedCommMs: 85, hiddenCommMs: null, overheadMs: null, measured: false, bound: 'communication' });
  });

  it('a mixed ring: commMs stands in for the member that did not report; hidden and overhead only from those that did', () => {
    const s = stepSplit([t('old', 50, 100), t('new1', 60, 80, { exposedCommMs: 20, overheadMs: 4 }), t('new2', 55, 90, { exposedCommMs: 30, overheadMs: 8 })])!;
    expect(s.exposedCommMs).toBe(30); // median of 100, 20, 30
    expect(s.hiddenCommMs).toBe(60); // median of 60, 60
    expect(s.overheadMs).toBe(6);
    expect(s.measured).toBe(false);
  });

  it('a ring of one: nothing to all-reduce, with or without the new fields', () => {
    expect(stepSplit([t('a', 80, 0, { exposedCommMs: 0, overheadMs: 3 })])).toEqual({
      computeMs: 80, exposedCommMs: 0, hiddenCommMs: 0, overheadMs: 3, measured: true, peers: 1, reusedImages: 0, bound: 'compute',
    });
    expect(stepSplit([t('a', 80, 0)])).toMatchObject({ exposedCommMs: 0, hiddenCommMs: null, overheadMs: null, peers: 1 });
  });

  it('a re-run with reused images: compute is still the slowest member\'s; the reused images are counted', () => {
    // b reused its whole slice from the aborted attempt (computed nothing now); c reused part of its own.
    const s = stepSplit([
      t('a', 70, 20, { exposedCommMs: 5, overheadMs: 1 }), t('b', 0, 20, { reused: 8, exposedCommMs: 75, overheadMs: 1 }),
      t('c', 30, 20, { reused: 4, exposedCommMs: 45, overheadMs: 1 }),
    ])!;
    expect(s.computeMs).toBe(70);
    expect(s.reusedImages).toBe(12);
    // b waited for the others after its (empty) backward: exposed above commMs, so nothing hidden.
    expect(s.hiddenCommMs).toBe(0);
    expect(s.bound).toBe('compute');
  });

  it('exposed above commMs (waiting for a slower neighbour after backward) hides nothing, never a negative amount', () => {
    expect(
      stepSplit([t('a', 10, 5, { exposedCommMs: 40, overheadMs: 0 }), t('b', 10, 5, { exposedCommMs: 40, overheadMs: 0 })]),
    ).toMatchObject({ hiddenCommMs: 0, bound: 'communication' });
  });

  it('overhead-bound', () => {
    expect(stepSplit([t('a', 10, 5, { exposedCommMs: 2, overheadMs: 30 }), t('b', 12, 5, { exposedCommMs: 3, overheadMs: 25 })])!.bound).toBe('overhead');
  });

  it('values a metrics file should not hold (NaN, negative, a bad reused) count as 0 or absent, never NaN', () => {
    const s = stepSplit([t('a', Number.NaN, -5, { exposedCommMs: Number.NaN, overheadMs: -1, reused: 1.5 }), t('b', 20, 10)])!;
    for (const v of [s.computeMs, s.exposedCommMs, s.hiddenCommMs ?? 0, s.overheadMs ?? 0]) expect(Number.isFinite(v)).toBe(true);
    expect(s).toMatchObject({ computeMs: 20, exposedCommMs: 5, hiddenCommMs: null, overheadMs: 0, reusedImages: 0, measured: false });
  });

  it('a record without timings has no split', () => {
    expect(stepSplit([])).toBeNull();
  });
});

describe('splitSummary', () => {
  const s: StepSplit = { computeMs: 120, exposedCommMs: 20, hiddenCommMs: 60, overheadMs: 6, measured: true, peers: 3, reusedImages: 0, bound: 'compute' };
  it('says what bounds the step and how much of the all-reduce backward hid', () => {
    expect(splitSummary(42, s)).toBe('step 42: compute-bound; backward hid 60 of 80 ms of all-reduce (75%)');
    expect(
      splitSummary(16, { ...s, hiddenCommMs: null, measured: false, bound: 'communication' }, true),
    ).toBe('round to step 16: communication-bound (all-reduce 20 ms; no overlap split reported)');
    expect(splitSummary(3, { ...s, peers: 1, exposedCommMs: 0, hiddenCommMs: 0 })).toBe('step 3: compute-bound (a ring of one: nothing to all-reduce)');
    expect(splitSummary(3, { ...s, exposedCommMs: 0, hiddenCommMs: 0 })).toBe('step 3: compute-bound; backward hid 0 of 0 ms of all-reduce');
  });
});

describe('stepSplitSvg', () => {
  const full = (computeMs: number, exposedCommMs: number, overheadMs: number, hiddenCommMs: number): StepSplit =>
    ({ computeMs, exposedCommMs, overheadMs, hiddenCommMs, measured: true, peers: 3, reusedImages: 0, bound: 'compute' });

  it('stacks compute, exposed all-reduce and overhead from the axis up, the hidden part over compute\'s top, on round ticks', () => {
    const svg = stepSplitSvg([{ step: 1, split: full(100, 30, 10, 40) }, { step: 2, split: full(120, 20, 10, 200) }], { width: 560, height: 340 });
    expect(texts(svg, 'tick-y')).toEqual(['0', '50', '100', '150']);
    expect(texts(svg, 'tick-x')).toEqual(['1', '2']);
    expect(texts(svg, 'summary')).toEqual(['step 2: compute-bound; backward hid 200 of 220 ms of all-reduce (91%)']);
    const [c, e, o, h] = ['compute', 'comm', 'overhead', 'hidden'].map((k) => rects(svg, k));
    const bottom = 340 - 60;
    for (let i = 0; i < 2; i++) {
      expect(c![i]!.y + c![i]!.h).toBeCloseTo(bottom, 0);
      expect(e![i]!.y + e![i]!.h).toBeCloseTo(c![i]!.y, 0);
      expect(o![i]!.y + o![i]!.h).toBeCloseTo(e![i]!.y, 0);
      // The hidden part starts at compute's top and never reaches below its bottom.
      expect(h![i]!.y).toBeCloseTo(c![i]!.y, 0);
      expect(h![i]!.h).toBeLessThanOrEqual(c![i]!.h + 0.05);
    }
    // 200 ms hidden behind 120 ms of compute is drawn as all of compute (the rest overlapped waiting).
    expect(h![1]!.h).toBeCloseTo(c![1]!.h, 0);
    expect(c![1]!.h / c![0]!.h).toBeCloseTo(1.2, 1);
    expect(svg).not.toContain('class="note"');
  });

  it('older steps draw pale and say so; a ring of one and a re-run with reused images are noted; no NaN', () => {
    const old: StepSplit = {
      computeMs: 50, exposedCommMs: 80, hiddenCommMs: null, overheadMs: null, measured: false, peers: 2, reusedImages: 0, bound: 'communication',
    };
    const solo: StepSplit = { ...full(60, 0, 2, 0), peers: 1 };
    const rerun: StepSplit = { ...full(70, 10, 2, 30), reusedImages: 12 };
    const svg = stepSplitSvg([{ step: 8, split: old }, { step: 16, split: solo }, { step: 24, split: rerun }], { width: 560, height: 340, rounds: true });
    expect(svg).toContain('where the time of each round went');
    expect(svg).toContain('step (at the end of each round)');
    expect(rects(svg, 'comm comm-fallback').length).toBe(1);
    expect(rects(svg, 'overhead').length).toBe(2);
    expect(rects(svg, 'hidden').length).toBe(1);
    expect(texts(svg, 'reused')).toEqual(['*']);
    const notes = texts(svg, 'note');
    expect(notes.length).toBe(3);
    expect(notes[0]).toMatch(/^pale: no overlap split/);
    expect(notes[1]).toMatch(/ring of one/);
    expect(notes[2]).toMatch(/^\* re-run/);
    // The svg grows by a line per note and every note fits the chart's width (about 6.5 px a character).
    expect(svg).toMatch(/^<svg [^>]*height="388"/);
    for (const n of notes) expect(12 + 6.5 * n.length).toBeLessThan(560);
    const legend = [...svg.matchAll(/<text class="legend" x="([\d.]+)"[^>]*>([^<]*)</g)].map((m) => Number(m[1]) + 6.5 * m[2]!.length);
    expect(legend.length).toBe(4);
    expect(Math.max(...legend)).toBeLessThan(560);
    // Rounds 8 steps apart: the bars are as wide as that spacing allows, not 1 px.
    expect(rects(svg, 'compute')[0]!.w).toBeGreaterThan(40 - 1e-9);
    expect(svg).not.toMatch(/NaN|Infinity/);
  });

  it('one step, or all zeros, still draws; no step: a placeholder', () => {
    for (const svg of [stepSplitSvg([{ step: 5, split: full(10, 1, 1, 1) }]), stepSplitSvg([{ step: 5, split: full(0, 0, 0, 0) }])]) {
      expect(svg).not.toMatch(/NaN|Infinity/);
      expect(texts(svg, 'tick-x')).toEqual(['5']);
      expect(texts(svg, 'tick-y').length).toBeGreaterThanOrEqual(2);
    }
    expect(stepSplitSvg([])).toContain('no step committed yet');
  });
});
