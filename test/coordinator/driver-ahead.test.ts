// Make before break (coordinator/driver-ahead.ts): a planned membership change of a formed ring
// of ADMIT_BATCH_FROM or more is announced to the new ring first ('prepare'), the ring trains on
// in its generation meanwhile, and the change is made one step after every member of the new
// ring said 'prepared' (or prepareMs passed), over exactly the ring announced; that step's
// assignments hint each member's slice of the new ring's first step, and the joiner's load-state
// its own. An unplanned loss of a member adapts the announcement (announced again without it).
// Every step is committed once (no step lost or doubled) throughout.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { answer, commitAll as commit, committedSteps, driverHarness } from './driver-harness.ts';
import type { PrepareRing, StepAssignment } from '../../src/protocol/messages.ts';

const RING = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];

/** A ring of 8 that has committed a step, at fake time 1,000,000 (a calm ring: joiners are due at once). */
function formedRing(prepareMs = 2000): { h: ReturnType<typeof driverHarness>; as: StepAssignment[] } {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(1_000_000);
  const h = driverHarness({ steps: 50 }, { timeouts: { prepareMs } });
  const as = commit(h, h.startRing(RING));
  vi.setSystemTime(1_010_000);
  return { h, as };
}

/** formedRing, then joiner j arrives: its entry is announced with the next step; returns that step's assignments. */
function joinerAnnounced(): { h: ReturnType<typeof driverHarness>; as: StepAssignment[] } {
  const { h, as } = formedRing();
  h.d.peerConnected('j', null);
  return { h, as: commit(h, as) };
}

function noStepLostOrDoubled(h: ReturnType<typeof driverHarness>): void {
  const steps = committedSteps(h);
  expect(steps, 'every step committed once, in order').toEqual(steps.map((_, i) => i + 1));
}

/** The change is being made: a uploads the step's checkpoint, j loads it and says ready. */
function joinerEnters(h: ReturnType<typeof driverHarness>): void {
  const step = h.d.status().step;
  h.take('a', 'upload-checkpoint');
  h.d.checkpointStored('a', step);
  h.take('j', 'load-state');
  h.ready('j', step);
}

describe('a planned change announced ahead', () => {
  afterEach(() => vi.useRealTimers());

  it('a joiner: the new ring hears of it first, the old one trains on, and the change comes once all said prepared', () => {
    const { h: hh, as: first } = formedRing();
    let as = first;
    const generation = as[0]!.generation;
    hh.d.peerConnected('j', null);
    as = commit(hh, as);
    // Announced to every member of the planned ring, the joiner included; nobody loads anything yet.
    const planned = [...RING, 'j'];
    const notes = planned.map((id) => hh.take(id, 'prepare'));
    expect(notes[0]).toEqual({ type: 'prepare', id: 1, ring: planned } satisfies PrepareRing);
    expect(hh.has('j', 'load-state') || hh.has('a', 'upload-checkpoint')).toBe(false);
    // Signaling lets the new neighbours connect now (h -> j -> a).
    expect(hh.d.preparedRing()?.ring).toEqual(planned);
    // The ring trains on in its generation while its members dial ahead.
    expect(as.map((a) => a.generation)).toEqual(RING.map(() => generation));
    for (const id of planned.slice(0, 8)) hh.d.message(id, { type: 'prepared', peerId: id, id: 1 });
    as = commit(hh, as);
    expect(hh.has('j', 'load-state') || hh.has('a', 'upload-checkpoint')).toBe(false);
    // The last answer (the joiner's): one more step in the old ring, hinting the new ring's slices...
    hh.d.message('j', { type: 'prepared', peerId: 'j', id: 1 });
    as = commit(hh, as);
    expect(hh.has('a', 'upload-checkpoint')).toBe(false);
    expect(as.map((a) => a.generation)).toEqual(RING.map(() => generation));
    const hints = new Map(as.map((a) => [a.ring[a.rank]!, a.next!]));
    // The joiner hears its first slice now too (a repeated announcement), to load it while it waits.
    const early = hh.take('j', 'prepare');
    expect(early).toMatchObject({ id: 1, ring: planned, next: { step: as[0]!.step + 1 } });
    // ... then the change.
    commit(hh, as);
    const step = hh.d.status().step;
    expect(hh.take('a', 'upload-checkpoint')).toEqual({ type: 'upload-checkpoint', step });
    hh.d.checkpointStored('a', step);
    const load = hh.take('j', 'load-state');
    expect(load).toMatchObject({ step, next: { step } });
    expect(load.next).toEqual(early.next);
    hints.set('j', load.next!);
    hh.ready('j', step);
    const next = planned.map((id) => hh.take(id, 'step-assignment'));
    expect(next[0]!.ring, 'the ring announced').toEqual(planned);
    expect(new Set(next.map((a) => a.generation))).toEqual(new Set([generation + 1]));
    // Every member (the joiner too) computes exactly the slice it was hinted, and the slices are the step's batch.
    for (const a of next) expect(a.sampleIds, a.ring[a.rank]).toEqual(hints.get(a.ring[a.rank]!)!.sampleIds);
    expect(next.reduce((n, a) => n + a.sampleIds.length, 0)).toBe(12);
    commit(hh, next);
    noStepLostOrDoubled(hh);
    hh.d.stop();
  });

  it('the announced plan is the one begun even if the measured links change meanwhile (two-level)', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const h = driverHarness({ steps: 50, twoLevelFrom: 8 }, { timeouts: { prepareMs: 2000 } });
    let as = commit(h, h.startRing(RING));
    vi.setSystemTime(1_010_000);
    h.d.peerConnected('j', null);
    as = commit(h, as);
    const note = h.take('a', 'prepare');
    expect(note.topology, 'a two-level plan').toBeDefined();
    for (const id of note.ring) h.d.message(id, { type: 'prepared', peerId: id, id: note.id });
    // More steps' results (new link measurements) before the change is made.
    as = commit(h, as);
    as = commit(h, as);
    joinerEnters(h);
    const next = note.ring.map((id) => h.take(id, 'step-assignment'));
    expect(next[0]!.ring).toEqual(note.ring);
    expect(next[0]!.topology).toEqual(note.topology);
    h.d.stop();
  });

  it('made at prepareMs even when a member never answers', () => {
    const { h, as: first } = joinerAnnounced();
    let as = first;
    expect(h.take('j', 'prepare').ring).toEqual([...RING, 'j']);
    // Nobody answers. Still training in the old ring 1.9 s later...
    vi.setSystemTime(1_011_900);
    as = commit(h, as);
    expect(h.has('j', 'load-state') || h.has('a', 'upload-checkpoint')).toBe(false);
    // ... and changed once the 2 s are over (after one more step, which hints the new ring's slices).
    vi.setSystemTime(1_012_100);
    as = commit(h, as);
    expect(h.has('a', 'upload-checkpoint')).toBe(false);
    commit(h, as);
    expect(h.has('a', 'upload-checkpoint')).toBe(true);
    noStepLostOrDoubled(h);
    h.d.stop();
  });

  it('a member that asked to leave after its step trains on until the ring without it is prepared', () => {
    const { h, as: first } = formedRing();
    let as = first;
    h.d.message('c', { type: 'leave', peerId: 'c', reason: 'stopped by its owner', afterStep: true });
    as = commit(h, as);
    const planned = RING.filter((id) => id !== 'c');
    expect(h.take('a', 'prepare').ring).toEqual(planned);
    expect(h.has('c', 'prepare'), 'the leaver is not in the new ring').toBe(false);
    expect(as.map((a) => a.ring.length)).toEqual(RING.map(() => 8));
    for (const id of planned) h.d.message(id, { type: 'prepared', peerId: id, id: 1 });
    as = commit(h, as);
    expect(h.has('c', 'done')).toBe(false);
    expect(as.find((a) => a.ring[a.rank] === 'c')!.next, 'no hint for the leaver').toBeUndefined();
    as = commit(h, as);
    expect(h.take('c', 'done').reason).toMatch(/left after its step/);
    expect(as[0]!.ring).toEqual(planned);
    commit(h, as);
    noStepLostOrDoubled(h);
    h.d.stop();
  });

  it('a crash of a member of the announced ring adapts the announcement: announced again without it, then made', () => {
    const { h, as: first } = joinerAnnounced();
    let as = first;
    for (const id of [...RING, 'j']) expect(h.take(id, 'prepare').id).toBe(1);
    for (const id of [...RING, 'j']) h.d.message(id, { type: 'prepared', peerId: id, id: 1 });
    h.d.peerGone('d', 'its session closed');
    const planned = [...RING.filter((id) => id !== 'd'), 'j'];
    expect(h.d.preparedRing()?.ring).toEqual(planned);
    // Announced again (a new id) to the ring without d; the answers to id 1 no longer count.
    for (const id of planned) expect(h.take(id, 'prepare')).toEqual({ type: 'prepare', id: 2, ring: planned });
    expect(h.has('d', 'prepare')).toBe(false);
    // The step is re-run by the survivors (a new generation of 7) while the joiner waits.
    const survivors = RING.filter((id) => id !== 'd');
    as = commit(h, survivors.map((id) => h.take(id, 'step-assignment')));
    expect(h.has('j', 'load-state')).toBe(false);
    for (const id of planned) h.d.message(id, { type: 'prepared', peerId: id, id: 2 });
    as = commit(h, as);
    commit(h, as);
    joinerEnters(h);
    const next = planned.map((id) => h.take(id, 'step-assignment'));
    expect(next[0]!.ring, 'the ring announced the second time').toEqual(planned);
    commit(h, next);
    noStepLostOrDoubled(h);
    h.d.stop();
  });

  it('a crash once the change is armed: the survivors re-run their step first, then the change is made', () => {
    const { h, as: first } = joinerAnnounced();
    let as = first;
    for (const id of [...RING, 'j']) h.take(id, 'prepare');
    for (const id of [...RING, 'j']) h.d.message(id, { type: 'prepared', peerId: id, id: 1 });
    as = commit(h, as); // armed: this step hints the new ring
    h.take('j', 'prepare');
    // d crashes mid-step (after a few results): the step is aborted and re-run by the survivors, joiner outside.
    for (const a of as.slice(0, 3)) answer(h, a.ring[a.rank]!, a);
    h.d.peerGone('d', 'its session closed');
    const survivors = RING.filter((id) => id !== 'd');
    const rerun = survivors.map((id) => h.take(id, 'step-assignment'));
    expect(rerun[0]!.reuse, 'a slice re-run').toBeDefined();
    expect(h.has('j', 'load-state') || h.has('a', 'upload-checkpoint')).toBe(false);
    commit(h, rerun);
    // Now the change, over the announced ring without d.
    joinerEnters(h);
    const next = [...survivors, 'j'].map((id) => h.take(id, 'step-assignment'));
    expect(next[0]!.ring).toEqual([...survivors, 'j']);
    commit(h, next);
    noStepLostOrDoubled(h);
    h.d.stop();
  });

  it('a member lost while the joiners load: the ring announced, without it, is the one begun', () => {
    const { h, as: first } = joinerAnnounced();
    let as = first;
    const note = h.take('a', 'prepare');
    for (const id of note.ring.slice(1)) h.take(id, 'prepare');
    for (const id of note.ring) h.d.message(id, { type: 'prepared', peerId: id, id: note.id });
    as = commit(h, as);
    commit(h, as);
    expect(h.take('j', 'prepare').next, 'its first slice, sent when the change was armed').toBeDefined();
    // The change is being made: a uploads the checkpoint, j will load it. Now e is lost.
    const step = h.d.status().step;
    h.take('a', 'upload-checkpoint');
    h.d.peerGone('e', 'stopped by its owner');
    const planned = [...RING.filter((id) => id !== 'e'), 'j'];
    expect(h.take('j', 'prepare')).toMatchObject({ ring: planned });
    h.d.checkpointStored('a', step);
    h.take('j', 'load-state');
    h.ready('j', step);
    const next = planned.map((id) => h.take(id, 'step-assignment'));
    expect(next[0]!.ring).toEqual(planned);
    commit(h, next);
    noStepLostOrDoubled(h);
    h.d.stop();
  });

  it('rings under ADMIT_BATCH_FROM and prepareMs 0 make the change at once', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const small = driverHarness({ steps: 50 }, { timeouts: { prepareMs: 2000 } });
    let as = commit(small, small.startRing(['a', 'b', 'c']));
    vi.setSystemTime(1_010_000);
    small.d.peerConnected('j', null);
    as = commit(small, as);
    expect(small.has('a', 'prepare')).toBe(false);
    expect(small.has('a', 'upload-checkpoint')).toBe(true);
    small.d.stop();
    const { h, as: first } = formedRing(0);
    h.d.peerConnected('j', null);
    commit(h, first);
    expect(h.has('a', 'prepare')).toBe(false);
    expect(h.has('a', 'upload-checkpoint')).toBe(true);
    h.d.stop();
  });
});
