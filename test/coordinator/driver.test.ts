// The training driver on its own, with peers played by the test through its inputs (no
// sockets): what it assigns, when it re-runs a step, and what it does when the ring empties.
import { describe, expect, it } from 'vitest';
import { N_TRAIN, driverHarness } from './driver-harness.ts';
import { stepSamples } from '../../src/train/sampler.ts';

const harness = (config: Record<string, unknown>, checkpointStep: number | null = null) => driverHarness(config, { checkpointStep });

describe('driver', () => {
  it('waits for minPeers, then assigns slices that cover exactly the step\'s sample ids', () => {
    const h = harness({ minPeers: 3 });
    h.d.peerConnected('a', null);
    h.d.peerConnected('b', null);
    expect(h.sent).toEqual([]);
    h.d.peerConnected('c', null);
    for (const id of ['a', 'b', 'c']) {
      expect(h.take(id, 'load-state')).toEqual({ type: 'load-state', source: 'seed', step: 0 });
      h.ready(id, 0);
    }
    const as = ['a', 'b', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(as.map((a) => a.rank)).toEqual([0, 1, 2]);
    expect(as.flatMap((a) => a.sampleIds)).toEqual(stepSamples(9, 0, 12, N_TRAIN).ids);
    h.d.stop();
  });

  it('a member lost mid-step: the same step again with the same samples over the survivors, in a new generation', () => {
    const h = harness({});
    let as = h.startRing(['a', 'b', 'c']);
    for (let i = 0; i < 3; i++) h.result(['a', 'b', 'c'][i]!, as[i]!);
    as = ['a', 'b', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(as[0]!.step).toBe(1);
    h.result('a', as[0]!); // a finished step 1, then b dies
    h.d.peerGone('b', 'killed');
    const again = ['a', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(again.map((a) => a.step)).toEqual([1, 1]);
    expect(again[0]!.generation).toBe(as[0]!.generation + 1);
    expect(again[0]!.ring).toEqual(['a', 'c']);
    expect(again.flatMap((a) => a.sampleIds)).toEqual(stepSamples(9, 1, 12, N_TRAIN).ids);
    // A late result of the aborted generation is ignored.
    h.result('c', as[2]!);
    expect(h.d.status().step).toBe(1);
    h.result('a', again[0]!);
    h.result('c', again[1]!);
    expect(h.d.status().step).toBe(2);
    expect(h.records.filter((r) => r.type === 'abort').map((r) => r.step)).toEqual([2]);
    expect(h.records.filter((r) => r.type === 'step').map((r) => r.step)).toEqual([1, 2]);
    h.d.stop();
  });

  it('a ring that empties falls back to the newest checkpoint: the next peers load it and redo the steps after it', () => {
    const h = harness({}, 4);
    h.d.peerConnected('a', null);
    expect(h.take('a', 'load-state')).toEqual({ type: 'load-state', source: 'checkpoint', step: 4 });
    h.ready('a', 4);
    let a = h.take('a', 'step-assignment');
    expect(a.step).toBe(4);
    h.result('a', a);
    a = h.take('a', 'step-assignment');
    h.result('a', a);
    h.take('a', 'step-assignment');
    expect(h.d.status().step).toBe(6);
    h.d.peerGone('a', 'closed');
    h.d.peerConnected('b', null);
    expect(h.take('b', 'load-state')).toEqual({ type: 'load-state', source: 'checkpoint', step: 4 });
    h.ready('b', 4);
    expect(h.take('b', 'step-assignment').step).toBe(4);
    h.d.stop();
  });

  it('a collective failure evicts the peer the ring blames; a stranger named in it blames the reporter', () => {
    const h = harness({});
    const as = h.startRing(['a', 'b', 'c']);
    h.d.message('a', { type: 'collective-failure', peerId: 'a', generation: as[0]!.generation, step: 0, failedPeerId: 'b', kind: 'peer-timeout' });
    expect(h.take('b', 'evicted').reason).toMatch(/ring failed/);
    const again = ['a', 'c'].map((id) => h.take(id, 'step-assignment'));
    h.d.message('c', { type: 'collective-failure', peerId: 'c', generation: again[1]!.generation, step: 0, failedPeerId: 'zz', kind: 'bad-frame' });
    expect(h.take('c', 'evicted').reason).toMatch(/reported by c/);
    expect(h.take('a', 'step-assignment').ring).toEqual(['a']);
    h.d.stop();
  });
});
