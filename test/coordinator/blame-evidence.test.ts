// Blame that weighs evidence across rings (coordinator/blame.ts). The full-suite failure of
// issue 41: a member nobody new could reach (every failed edge ran to it) stayed, while each
// joiner that failed towards it was evicted, six in a row. With the evidence of earlier rings the
// old member is blamed once it has failed with a second, different joiner; a joiner whose only
// failure is towards it is evicted only while there is no such evidence (the first one). The
// newcomer behind a NAT, who fails with both its neighbours, is still the one blamed.
import { describe, expect, it } from 'vitest';
import type { StepAssignment } from '../../src/protocol/messages.ts';
import { blameUnreachable, noEvidence, withFailures } from '../../coordinator/blame.ts';
import { commitAll, driverHarness } from './driver-harness.ts';

type H = ReturnType<typeof driverHarness>;

/** `j` connects, loads the seed or the checkpoint it is told, and its first ring's assignments come (in ring order). */
function admit(h: H, j: string, as: StepAssignment[]): StepAssignment[] {
  h.d.peerConnected(j, j);
  // The running step commits; the joiner is admitted at the boundary, from a checkpoint the ring's first member uploads.
  expect(commitAll(h, as)).toEqual([]);
  const ring = h.d.status().ring;
  const up = h.take(ring[0]!, 'upload-checkpoint');
  h.d.checkpointStored(ring[0]!, up.step);
  h.ready(j, h.take(j, 'load-state').step);
  expect(h.d.status().ring).toContain(j);
  return h.d.status().ring.map((id) => h.take(id, 'step-assignment'));
}

/** The joiner and `d` each report that their link could not be opened; the others answer their step. */
function failBetween(h: H, as: StepAssignment[], j: string, d: string): void {
  for (const a of as) {
    const id = a.ring[a.rank]!;
    if (id !== j && id !== d) h.d.message(id, {
      type: 'step-result', peerId: id, generation: a.generation, step: a.step, loss: 1, checksum: 'c0ffee', timings: { computeMs: 10, commMs: 1, waitMs: 0 },
      images: a.sampleIds.length,
    });
  }
  // The last report decides (every member has reported or answered).
  for (const a of as) {
    const id = a.ring[a.rank]!;
    if (id === j || id === d) h.d.message(id, {
      type: 'collective-failure', peerId: id, generation: a.generation, step: a.step, failedPeerId: id === j ? d : j, kind: 'connect-failed',
    });
  }
}

const evicted = (h: H): string[] => h.sent.filter((s) => s.m.type === 'evicted').map((s) => s.to);

describe('blame that weighs evidence', () => {
  it('joiners failing only towards one old member: the first joiner goes (no evidence yet), then the old member, not six joiners', () => {
    const h = driverHarness({ globalBatch: 24, steps: 100, stealFraction: 0 });
    let as = h.startRing(['a', 'b', 'd']);
    as = commitAll(h, as);
    for (const j of ['j1', 'j2']) {
      as = admit(h, j, as);
      failBetween(h, as, j, 'd');
      as = h.d.status().ring.map((id) => h.take(id, 'step-assignment'));
    }
    expect(evicted(h)).toEqual(['j1', 'd']);
    expect(h.d.status().ring).toEqual(['a', 'b', 'j2']);
    const reason = h.sent.find((s) => s.to === 'd' && s.m.type === 'evicted')!.m;
    expect(reason).toMatchObject({ cause: 'unreachable' });
    expect(JSON.stringify(reason)).toMatch(/before this ring it failed with j1/);
    h.d.stop();
  });

  it('a newcomer behind a NAT fails with both neighbours: it is blamed, even where one neighbour failed with someone before', () => {
    const seen = withFailures(noEvidence(), [['a', 'old-joiner']], 0);
    expect(blameUnreachable(['a', 'b', 'c', 'n'], [['n', 'a'], ['a', 'n'], ['n', 'c'], ['c', 'n']], seen)).toBe('n');
    expect(blameUnreachable(['a', 'b', 'c', 'n'], [['n', 'a'], ['n', 'c']])).toBe('n');
  });

  it('one machine rejoining under new ids is one partner, and evidence older than the window is gone', () => {
    const name = (id: string) => id.replace(/-\d+$/, '');
    let seen = withFailures(noEvidence(), [['n', 'a']], 0);
    // n rejoined as n-2: a has failed with one machine only, so the tie goes to the newest (n-2).
    expect(blameUnreachable(['a', 'b', 'n-2'], [['n-2', 'a'], ['a', 'n-2']], seen, name)).toBe('n-2');
    // A second machine failing towards a: a is the suspect.
    seen = withFailures(seen, [['n', 'a']], 1000);
    expect(blameUnreachable(['a', 'b', 'm'], [['m', 'a'], ['a', 'm']], seen, name)).toBe('a');
    // Ten minutes later the old failures no longer count.
    const later = withFailures(seen, [], 1000 + 10 * 60_000);
    expect(later.failedWith.size).toBe(0);
  });
});
