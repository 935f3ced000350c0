// Sessions that close together (a host of several volunteers crashed) reach the driver as one
// loss (Driver.peersGone; coordinator/run.ts batches closes within CLOSE_BATCH_MS): one abort,
// one new generation, whose re-run reuses the survivors' kept sums of the aborted attempt. One
// by one, the first close began a generation still holding the other dead, which aborted again
// and left the survivors with no usable sum of it.
import { describe, expect, it } from 'vitest';
import { answer, driverHarness } from './driver-harness.ts';

describe('several sessions closing together', () => {
  it('make one abort and one generation; the re-run reuses the aborted attempt of the generation before', () => {
    const h = driverHarness({ globalBatch: 24 });
    const ring = ['a', 'b', 'c', 'd', 'e'];
    let as = h.startRing(ring);
    for (const a of as) answer(h, a.ring[a.rank]!, a);
    as = ring.map((id) => h.take(id, 'step-assignment'));
    const generation = as[0]!.generation;
    answer(h, 'a', as[0]!); // a finished its slice; the others are mid-step when c, d and e crash
    h.d.peersGone([{ id: 'c', reason: 'session closed (1006)' }, { id: 'd', reason: 'session closed (1006)' }, { id: 'e', reason: 'killed' }]);
    const aborts = h.records.filter((r) => r.type === 'abort');
    expect(aborts).toHaveLength(1);
    expect(aborts[0]!.type === 'abort' && aborts[0]!.reason).toBe('c, d, e left (session closed (1006); killed)');
    const gens = h.records.filter((r) => r.type === 'generation');
    expect(gens.at(-1)!.type === 'generation' && gens.at(-1)!.ring).toEqual(['a', 'b']);
    const rerun = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(rerun.every((a) => a.generation === generation + 1)).toBe(true);
    expect(rerun.every((a) => a.reuse?.generation === generation), 'each survivor reuses its sum of the aborted attempt').toBe(true);
    expect(
      h.events.filter((e) => e.type === 'peer-left').map((e) => e.type === 'peer-left' && e.reason),
    ).toEqual(['session closed (1006)', 'session closed (1006)', 'killed']);
    for (const a of rerun) answer(h, a.ring[a.rank]!, a);
    expect(h.records.filter((r) => r.type === 'step').map((r) => r.step)).toEqual([1, 2]);
    h.d.stop();
  });

  it('an id already gone, or never here, is skipped: nothing aborts for it', () => {
    const h = driverHarness({});
    const as = h.startRing(['a', 'b']);
    h.d.peersGone([{ id: 'zz', reason: 'never here' }]);
    expect(h.records.filter((r) => r.type === 'abort')).toHaveLength(0);
    for (const a of as) answer(h, a.ring[a.rank]!, a);
    h.d.peerGone('b', 'closed'); // mid step 2: one abort
    h.d.peersGone([{ id: 'b', reason: 'closed' }]); // the batch that comes after: nothing more
    expect(h.records.filter((r) => r.type === 'abort')).toHaveLength(1);
    expect(h.events.filter((e) => e.type === 'peer-left')).toHaveLength(1);
    h.d.stop();
  });
});
