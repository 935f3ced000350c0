// rankOf / inRing (coordinator/ring-index.ts): ranks by id, per ring array, as indexOf would say.
import { describe, expect, it } from 'vitest';
import { inRing, rankOf } from '../../coordinator/ring-index.ts';
import { MAX_RING } from '../../src/protocol/messages.ts';
import { driverHarness } from './driver-harness.ts';

describe('ring index', () => {
  it('gives the rank indexOf gives, -1 for a stranger, for each ring array on its own', () => {
    const ring = ['a', 'b', 'c'];
    for (const id of ['a', 'b', 'c', 'x']) expect(rankOf(ring, id)).toBe(ring.indexOf(id));
    const next = ring.filter((id) => id !== 'b');
    expect(rankOf(next, 'c')).toBe(1);
    expect(rankOf(ring, 'c')).toBe(2);
    expect(inRing(next, 'b')).toBe(false);
    expect(inRing(ring, 'b')).toBe(true);
    expect(rankOf([], 'a')).toBe(-1);
  });

  it('answers a ring of 2,000 members 2,000 times in a few milliseconds (indexOf: a sweep each)', () => {
    const ring = Array.from({ length: 2000 }, (_, i) => `peer-${i}`);
    const t0 = performance.now();
    let sum = 0;
    for (let k = 0; k < 2000; k++) sum += rankOf(ring, `peer-${k}`);
    expect(sum).toBe((1999 * 2000) / 2);
    expect(performance.now() - t0).toBeLessThan(200);
  });
});

describe('a full ring', () => {
  it('holds MAX_RING peers (the protocol bounds every message that names a ring so); the rest wait and enter as places free', () => {
    // The first ring waits for all of its places (minPeers), so the admission sees every peer at once.
    const h = driverHarness({ globalBatch: 500, steps: 100, stealFraction: 0, minPeers: MAX_RING });
    const ids = Array.from({ length: MAX_RING + 6 }, (_, i) => `p${i}`);
    for (const id of ids) h.d.peerConnected(id, null);
    const loading = ids.filter((id) => h.has(id, 'load-state'));
    expect(loading).toHaveLength(MAX_RING);
    for (const id of loading) { h.take(id, 'load-state'); h.ready(id, 0); }
    expect(h.d.status().ring).toHaveLength(MAX_RING);
    expect(h.logs.join('\n')).toMatch(new RegExp(`the ring is full \\(${MAX_RING} peers, the protocol's most\\): 6 peer\\(s\\) wait`));
    // A member leaves: the first standby takes its place (it loads), the others still wait.
    h.d.status().ring.forEach((id) => h.take(id, 'step-assignment'));
    h.d.message('p0', { type: 'leave', peerId: 'p0', reason: 'stopped by its owner' });
    expect(h.has(`p${MAX_RING}`, 'load-state')).toBe(true);
    expect(h.has(`p${MAX_RING + 1}`, 'load-state')).toBe(false);
    h.d.stop();
  });
});
