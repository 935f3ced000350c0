// The dashboard's ring: which edges run direct and which through a TURN relay, from the newest
// step's timings; and the drawing of them.
import { describe, expect, it } from 'vitest';
import type { PeerStepTiming, RingPeer } from '../../src/protocol/messages.ts';
import { ringSvg } from '../../src/ui/charts.ts';
import { charts, emptyModel, evalViews, fold, jobHeadOf, ringLinks, syncChoiceLine, verificationLine } from '../../src/ui/dashboard.ts';

const peer = (id: string): RingPeer => ({ id, name: id, device: 'cpu' });
const timing = (peerId: string, link?: 'direct' | 'relayed'): PeerStepTiming => ({
  peerId, images: 8, computeMs: 10, commMs: 5, waitMs: 1, ...(link ? { link } : {}),
});

describe('ring edge kinds', () => {
  const ring = [peer('a'), peer('b'), peer('c')];

  it('each edge ring[i] -> ring[i+1] takes the link ring[i] reported, in ring order', () => {
    const last = { generation: 4, timings: [timing('c', 'direct'), timing('a', 'relayed'), timing('b')] };
    expect(ringLinks(ring, 4, last)).toEqual(['relayed', undefined, 'direct']);
    expect(ringLinks(ring, null, last)).toEqual(['relayed', undefined, 'direct']);
  });

  it('a step of an older ring says nothing about this one; no step, nothing; a ring of one has no edge', () => {
    expect(ringLinks(ring, 5, { generation: 4, timings: [timing('a', 'direct')] })).toEqual([undefined, undefined, undefined]);
    expect(ringLinks(ring, 5, undefined)).toEqual([undefined, undefined, undefined]);
    expect(ringLinks([peer('a')], 1, { generation: 1, timings: [timing('a', 'direct')] })).toEqual([undefined]);
  });

  it('the dashboard folds events into a ring drawing with the right edges', () => {
    const m = emptyModel(24);
    fold(m, { type: 'generation', generation: 2, ring: ['a', 'b', 'c'], peers: ring }, 0);
    fold(m, {
      type: 'step', step: 1, generation: 2, loss: 2.3, imagesPerSec: 100, peers: 3,
      timings: [timing('a', 'direct'), timing('b', 'relayed'), timing('c', 'direct')],
    }, 1000);
    let svg = charts(m).at(-1)!;
    expect(svg).toContain('1 link relayed');
    expect(svg.match(/class="edge-direct"/g)?.length).toBe(2);
    expect(svg.match(/class="edge-relayed"/g)?.length).toBe(1);
    // A new ring forms: its edges are unknown until its first step reports them.
    fold(m, { type: 'generation', time: 2000, generation: 3, ring: ['a', 'c'], peers: [peer('a'), peer('c')] });
    svg = charts(m).at(-1)!;
    expect(svg.match(/class="edge-unknown"/g)?.length).toBe(2);
    expect(svg).not.toContain('relay-label');
  });
});

describe('rounds on the dashboard', () => {
  it('draws the bytes sent per image, labels rounds, and shares a round\'s images over its inner steps', () => {
    const m = emptyModel(24);
    fold(m, { type: 'generation', generation: 1, ring: ['a', 'b'], peers: [peer('a'), peer('b')] }, 0);
    fold(m, {
      type: 'step', step: 8, generation: 1, loss: 2.1, imagesPerSec: 90, peers: 2, timings: [{ ...timing('a'), images: 96 }, { ...timing('b'), images: 96 }],
      traffic: { innerSteps: 8, bytesPerImage: 52_000 },
    }, 1000);
    const all = charts(m).join('\n');
    expect(all).toContain('bytes sent per image (rounds)');
    expect(all).toContain('round to 8 a');
    expect(all).toContain('per-peer time in the last rounds');
    // Each peer computed 96 of the round's 8 x 24 images: half the work.
    expect(all).toMatch(/50%/);
  });
});

describe('the ring drawing', () => {
  it('relayed links dashed, labelled "relay", in a legend; direct ones solid; unknown neutral', () => {
    const svg = ringSvg('ring', [
      { label: 'a', detail: '', share: 0.3, link: 'direct' },
      { label: 'b', detail: '', share: 0.3, link: 'relayed' },
      { label: 'c', detail: '', share: 0.4 },
    ]);
    expect(svg.match(/class="edge-direct"[^>]*/)![0]).not.toContain('stroke-dasharray');
    expect(svg.match(/class="edge-relayed"[^>]*/)![0]).toContain('stroke-dasharray');
    expect(svg.match(/class="edge-unknown"[^>]*/)![0]).toContain('#bbb');
    expect(svg.match(/class="relay-label"[^>]*>relay</g)?.length).toBe(1);
    for (const legend of ['direct link', 'relayed (through TURN)', 'not reported yet']) expect(svg).toContain(legend);
  });

  it('a ring of two draws both edges apart; with nothing reported, no legend', () => {
    const two = ringSvg('ring', [{ label: 'a', detail: '', share: 0.5, link: 'direct' }, { label: 'b', detail: '', share: 0.5, link: 'relayed' }]);
    const d = [...two.matchAll(/class="edge-\w+" d="M[\d.,]+ Q([\d.]+),([\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
    expect(d.length).toBe(2);
    expect(Math.hypot(d[0]![0]! - d[1]![0]!, d[0]![1]! - d[1]![1]!)).toBeGreaterThan(50);
    const none = ringSvg('ring', [{ label: 'a', detail: '', share: 0.5 }, { label: 'b', detail: '', share: 0.5 }]);
    expect(none).not.toContain('not reported yet');
  });
});

describe('GET /api/job as the dashboard reads it', () => {
  it('takes what it needs and survives what it does not expect', () => {
    expect(jobHeadOf({ job: { name: 'j', model: 'small-cnn', dataset: 'cifar10', globalBatch: 256, access: 'private', totalSteps: 900 }, peers: 3 }))
      .toEqual({
        title: 'j: small-cnn on cifar10, global batch 256', globalBatch: 256, peers: 3, access: 'private', mode: 'every step synchronised (exact sync SGD)',
        dataset: 'cifar10', totalSteps: 900,
      });
    expect(jobHeadOf('nonsense')).toEqual({
      title: '?: ? on ?, global batch ?', globalBatch: 1, peers: 0, access: null, mode: 'every step synchronised (exact sync SGD)', dataset: null,
      totalSteps: null,
    });
    expect(jobHeadOf({ job: { dataset: '../etc' } }).dataset).toBeNull();
    expect(jobHeadOf({ job: { outer: { syncEvery: 8, lr: 0.7, momentum: 0.9 } } }).mode).toBe(
      'rounds: 8 local steps per peer, then one all-reduce (low-communication mode)',
    );
    expect(jobHeadOf({ job: { outer: { syncEvery: 8, lr: 1, momentum: 0, carry: 0.75 } } }).mode).toBe(
      "rounds: 8 local steps per peer, then one all-reduce (low-communication mode, inner momentum carried from the round's mean (0.75))",
    );
    expect(jobHeadOf({ job: { outer: { syncEvery: 8, carry: '<b>' } } }).mode).not.toContain('<b>');
    expect(jobHeadOf({ job: { outer: { syncEvery: 'x' } } }).mode).toMatch(/exact sync SGD/);
    expect(jobHeadOf({ job: { outer: { syncEvery: 8, auto: true, carry: 0.75 } } }).mode)
      .toBe("auto: the coordinator measures the ring and runs rounds of 1 to 8 steps (1: exact sync SGD, inner momentum carried from the round's mean (0.75))");
  });
});

describe('syncEvery "auto" on the dashboard', () => {
  it('shows the H in force, since when and why; an older choice arriving late does not replace a newer one', () => {
    const m = emptyModel();
    expect(syncChoiceLine(m.sync)).toBe('');
    const choice = { step: 4, from: 1, h: 8, share: 0.9, computeMs: 10, syncMs: 90, reason: 'the all-reduce and waiting are 90% of a sync step' };
    fold(m, { type: 'sync', time: 5, ...choice });
    expect(syncChoiceLine(m.sync)).toBe('rounds of 8 since step 4: the all-reduce and waiting are 90% of a sync step');
    fold(m, { type: 'sync', ...choice, step: 44, from: 8, h: 1, reason: 'cheap now' });
    expect(syncChoiceLine(m.sync)).toBe('every step synchronised since step 44: cheap now');
    fold(m, { type: 'sync', time: 1, ...choice });
    expect(m.sync?.step).toBe(44);
  });
});

describe('verified steps on the dashboard', () => {
  it('shows the audits, their cost in compute, disputes and the peers caught; a conviction stays shown as tallies go on', () => {
    const m = emptyModel();
    expect(verificationLine(m.verification, m.convicted)).toBe('');
    const t = { step: 5, audits: 4, caught: 0, disputes: 0, auditedImages: 12, computedImages: 400 };
    fold(m, { type: 'verification', time: 1, ...t });
    expect(verificationLine(m.verification, m.convicted)).toBe('verified: 4 audits (3.0% of the compute), 0 peers caught');
    fold(m, { type: 'verification', ...t, step: 9, audits: 7, caught: 1, disputes: 1, convicted: ['bad'], reason: 'its gradient differs' });
    fold(m, { type: 'verification', ...t, step: 12, audits: 9, caught: 1, disputes: 1, auditedImages: 30, computedImages: 1000, directed: 2 });
    expect(verificationLine(m.verification, m.convicted))
      .toBe('verified: 9 audits (3.0% of the compute), 2 of them of suspects, 1 dispute, 1 peer caught: bad in step 9 (its gradient differs)');
    // An older record arriving late (the history after a live event) does not go back.
    fold(m, { type: 'verification', time: 1, ...t });
    expect(m.verification?.step).toBe(12);
  });
});

describe('what an evaluation looked like', () => {
  const confusion = [3, 1, 0, 0, 2, 2, 1, 0, 5];
  const predictions = [{ id: 17, label: 0, predicted: 0, confidence: 0.91 }, { id: 4, label: 2, predicted: 1, confidence: 0.55 }];

  it('keeps the newest detailed evaluation: its grid of test images and its confusion matrix', () => {
    const m = emptyModel(8);
    m.classNames = ['cat', 'dog', 'ship'];
    expect(evalViews(m)).toEqual({ heading: '', grid: '', confusion: '' });
    fold(m, { type: 'eval', step: 50, top1: 0.5, top5: 0.9, loss: 1.2, samples: 14, confusion, predictions }, 0);
    // An evaluation without detail after it keeps the last one shown.
    fold(m, { type: 'eval', step: 60, top1: 0.6, top5: 0.9, loss: 1.1, samples: 14 }, 0);
    const v = evalViews(m);
    expect(v.heading).toMatch(/^Evaluation after step 50 on 14 test images: 2 of them/);
    expect(v.grid).toContain('src="/api/samples/val/17"');
    expect(v.grid).toContain('src="/api/samples/val/4"');
    expect(v.grid).toContain('dog 55% (true: ship)');
    expect(v.grid.match(/pred-ok/g)?.length).toBe(1);
    expect(v.confusion).toContain('confusion matrix after step 50');
    expect(v.confusion).toContain('accuracy 71.4% of 14');
    // The final one replaces it, and says so.
    fold(m, { type: 'eval', step: 90, top1: 0.7, top5: 0.95, loss: 0.9, samples: 10_000, final: true, confusion, predictions: [] }, 0);
    expect(evalViews(m).heading).toBe('Final evaluation after step 90 on 10000 test images');
    expect(evalViews(m).grid).toBe('');
  });

  it('classes beyond the names it knows are shown by number; a history re-run drops a newer detail', () => {
    const m = emptyModel(8);
    fold(m, { type: 'eval', step: 50, top1: 0.5, top5: 0.9, loss: 1.2, samples: 14, confusion, predictions }, 0);
    expect(evalViews(m).grid).toContain('class 1 55% (true: class 2)');
    fold(m, { type: 'eval', step: 40, top1: 0.5, top5: 0.9, loss: 1.2, samples: 14 }, 0);
    expect(evalViews(m).heading).toBe('');
  });

  it('the throughput chart puts peers on their own axis', () => {
    const m = emptyModel(8);
    fold(m, { type: 'step', step: 1, generation: 1, loss: 2.3, imagesPerSec: 430, peers: 3, timings: [timing('a')] }, 0);
    fold(m, { type: 'step', step: 2, generation: 1, loss: 2.2, imagesPerSec: 470, peers: 3, timings: [timing('a')] }, 60_000);
    const svg = charts(m).find((c) => c.includes('throughput and peers'))!;
    expect(svg).toContain('>peers</text>');
    expect(svg).toContain('>images/s</text>');
  });

  it('a checkpoint makes the model downloadable', () => {
    const m = emptyModel(8);
    fold(m, { type: 'checkpoint', time: 1, step: 25 });
    fold(m, { type: 'checkpoint', step: 50 }, 0);
    expect(m.checkpoint).toBe(50);
  });
});

describe('where the step time went, on the dashboard', () => {
  it('splits history records (with checksums) and live events alike; an older record draws pale', () => {
    const m = emptyModel(24);
    fold(m, { type: 'generation', time: 0, generation: 1, ring: ['a', 'b'], peers: [peer('a'), peer('b')] });
    // An older job's record: no split reported.
    fold(m, {
      type: 'step', time: 1000, step: 1, generation: 1, ring: 2, loss: 2.3, imagesPerSec: 90, wallMs: 200,
      peers: [{ ...timing('a'), checksum: 'aa' }, { ...timing('b'), checksum: 'aa' }],
    });
    fold(m, { type: 'step', step: 2, generation: 1, loss: 2.2, imagesPerSec: 95, peers: 2, timings: [
      { ...timing('a'), computeMs: 80, commMs: 40, exposedCommMs: 10, overheadMs: 4 },
      { ...timing('b'), computeMs: 90, commMs: 50, exposedCommMs: 14, overheadMs: 6 },
    ] }, 2000);
    const svg = charts(m).find((c) => c.includes('where the time of each step went'))!;
    // Step 2: compute 90 (b's), exposed median(10, 14) = 12, hidden median(30, 36) = 33, of 45.
    expect(svg).toContain('step 2: compute-bound; backward hid 33 of 45 ms of all-reduce (73%)');
    expect(svg.match(/class="comm comm-fallback"/g)?.length).toBe(1);
    expect(svg).toContain('pale: no overlap split');
    // The ring stays the last chart.
    expect(charts(m).at(-1)).toContain('the ring (2 peers');
  });
});
