// The last members leave together (a lab's desktops shut down at once): the coordinator must
// neither crash (it did: a step was planned for an empty ring) nor lose the steps since its
// newest checkpoint. One of the leavers uploads the checkpoint of their last step first, then
// all of them go, the job idles, and the next peer to come resumes AT that step: every step is
// committed once, with no gap and nothing redone.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { answer, commitAll as commit, committedSteps, driverHarness } from './driver-harness.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';

type H = ReturnType<typeof driverHarness>;

/** Every member of `ring` leaves after its step; checks the save, the goodbyes and the resume by a newcomer. */
function lastMembersLeave(h: H, ring: string[], first: StepAssignment[]): void {
  let as = first;
  for (let i = 0; i < 3; i++) as = commit(h, as);
  for (const id of ring) h.d.message(id, { type: 'leave', peerId: id, reason: 'stopped by its owner', afterStep: true });
  // Their running step commits (they leave AFTER it); then no step is planned for nobody.
  for (const a of as) answer(h, a.ring[a.rank]!, a);
  const step = h.d.status().step;
  expect(step).toBe(4);
  expect(ring.some((id) => h.has(id, 'step-assignment')), 'no step for a ring about to be empty').toBe(false);
  // The checkpoint of step 4 first (checkpointEvery is 100: the newest was the seed).
  const up = h.take(ring[0]!, 'upload-checkpoint');
  expect(up.step).toBe(4);
  expect(ring.some((id) => h.has(id, 'done')), 'nobody goes before the weights are saved').toBe(false);
  h.d.checkpointStored(ring[0]!, 4);
  for (const id of ring) expect(h.take(id, 'done').reason).toMatch(/left after its step/);
  expect(h.d.status().ring).toEqual([]);
  expect(h.logs.join('\n')).toMatch(/every member has left after step 4; waiting for peers to resume at it/);
  // A newcomer loads step 4 and trains step 5 on.
  h.d.peerConnected('z', null);
  const load = h.take('z', 'load-state');
  expect(load.step).toBe(4);
  h.ready('z', 4);
  const next = h.take('z', 'step-assignment');
  expect(next.step).toBe(4); // 0-based: the 5th update
  commit(h, [next]);
  expect(committedSteps(h), 'every step committed once, in order').toEqual([1, 2, 3, 4, 5]);
}

describe('the last members leave together', () => {
  afterEach(() => vi.useRealTimers());

  it('a ring of 2: one uploads the checkpoint of their last step, both go, and a newcomer resumes at it', () => {
    const h = driverHarness({ steps: 50 });
    lastMembersLeave(h, ['a', 'b'], h.startRing(['a', 'b']));
    h.d.stop();
  });

  it('a ring of 8 whose changes are announced ahead: the same, with no empty ring announced', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const ring = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const h = driverHarness({ steps: 50 }, { timeouts: { prepareMs: 2000 } });
    lastMembersLeave(h, ring, h.startRing(ring));
    expect(h.logs.join('\n')).not.toMatch(/a ring of 0 announced/);
    h.d.stop();
  });

  it('the uploader dies before its upload: another leaver uploads, then they go', () => {
    const h = driverHarness({ steps: 50 });
    let as = h.startRing(['a', 'b', 'c']);
    as = commit(h, as);
    for (const id of ['a', 'b', 'c']) h.d.message(id, { type: 'leave', peerId: id, reason: 'stopped by its owner', afterStep: true });
    for (const a of as) answer(h, a.ring[a.rank]!, a);
    expect(h.take('a', 'upload-checkpoint').step).toBe(2);
    h.d.peerGone('a', 'its session closed');
    expect(h.take('b', 'upload-checkpoint').step).toBe(2);
    h.d.checkpointStored('b', 2);
    for (const id of ['b', 'c']) expect(h.take(id, 'done').reason).toMatch(/left after its step/);
    expect(h.d.status().ring).toEqual([]);
    expect(committedSteps(h)).toEqual([1, 2]);
    h.d.stop();
  });
});

describe('the last members leave as a joiner comes', () => {
  it('the joiner enters with their leave, from the checkpoint of their last step', () => {
    const h = driverHarness({ steps: 50 });
    let as = h.startRing(['a', 'b']);
    as = commit(h, as);
    for (const id of ['a', 'b']) h.d.message(id, { type: 'leave', peerId: id, reason: 'stopped by its owner', afterStep: true });
    h.d.peerConnected('z', null);
    for (const a of as) answer(h, a.ring[a.rank]!, a);
    // The leavers wait for the upload: the joiner must not start from the seed.
    expect(h.take('a', 'upload-checkpoint').step).toBe(2);
    expect(h.has('z', 'load-state')).toBe(false);
    h.d.checkpointStored('a', 2);
    for (const id of ['a', 'b']) expect(h.take(id, 'done').reason).toMatch(/left after its step/);
    expect(h.take('z', 'load-state').step).toBe(2);
    h.ready('z', 2);
    commit(h, [h.take('z', 'step-assignment')]);
    expect(committedSteps(h)).toEqual([1, 2, 3]);
    h.d.stop();
  });
});
