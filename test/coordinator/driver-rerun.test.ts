// A lost peer costs its slice, not the step (coordinator/slice-rerun.ts): the re-run of a sync
// step gives each survivor its own slice again (which it kept the gradient sum of) plus a share
// of the lost ids, split by speed; the union is always the step's ids. Played with the driver
// harness (no sockets); the volunteer's side of the key check (usableKept) and the new protocol
// fields are checked here too.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { N_TRAIN, answer, driverHarness, imagesOf } from './driver-harness.ts';
import { keptSlices, planRerun, sampleDigest } from '../../coordinator/slice-rerun.ts';
import { auditMembers, sumPieces } from '../../coordinator/driver-steps.ts';
import { MOST_PROBED_FIRST, silenceLimitMs } from '../../coordinator/silence.ts';
import { RING_DEAD_MARGIN_MS, newPeer, ringDeadMs, silentPeers, type PeerRec } from '../../coordinator/driver-peers.ts';
import type { RunningPhase } from '../../coordinator/driver-types.ts';
import { stepSamples } from '../../src/train/sampler.ts';
import { RING_FORM_TIMEOUT_MS, type StepAssignment } from '../../src/protocol/messages.ts';
import { decodeCoordinatorMessage, decodePeerMessage } from '../../src/protocol/decode.ts';
import { usableKept } from '../../src/client/volunteer.ts';

const sorted = (ids: readonly number[]): number[] => [...ids].sort((a, b) => a - b);
const idsOf = (step: number, B = 12): number[] => sorted(stepSamples(9, step, B, N_TRAIN).ids);


describe('slice re-run after a loss', () => {
  it('survivors keep their slices first (reuse names the aborted generation) and share the lost ids by measured speed', () => {
    const h = driverHarness({ globalBatch: 24 });
    let as = h.startRing(['a', 'b', 'c']);
    // Step 1 measures speeds: a three times as fast as b (c like b).
    answer(h, 'a', as[0]!, 10);
    answer(h, 'b', as[1]!, 30);
    answer(h, 'c', as[2]!, 30);
    as = ['a', 'b', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(as[0]!.step).toBe(1);
    const [sa, sb, sc] = as.map((a) => a.sampleIds);
    h.d.peerGone('c', 'killed');
    const again = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(again.map((a) => [a.step, a.generation])).toEqual([[1, as[0]!.generation + 1], [1, as[0]!.generation + 1]]);
    expect(again[0]!.reuse).toEqual({ generation: as[0]!.generation, count: sa!.length });
    expect(again[1]!.reuse).toEqual({ generation: as[0]!.generation, count: sb!.length });
    expect(again[0]!.sampleIds.slice(0, sa!.length)).toEqual(sa);
    expect(again[1]!.sampleIds.slice(0, sb!.length)).toEqual(sb);
    const extraA = again[0]!.sampleIds.slice(sa!.length);
    const extraB = again[1]!.sampleIds.slice(sb!.length);
    expect(sorted([...extraA, ...extraB])).toEqual(sorted(sc!));
    expect(extraA.length).toBeGreaterThan(extraB.length); // the faster peer takes more of the lost slice
    expect(sorted(again.flatMap((a) => a.sampleIds))).toEqual(idsOf(1, 24));
    expect(h.logs.some((l) => /step 2 runs again .* compute the \d+ lost ids/.test(l)), h.logs.join('\n')).toBe(true);
    answer(h, 'a', again[0]!);
    answer(h, 'b', again[1]!);
    expect(h.d.status().step).toBe(2);
    const steps = h.records.filter((r) => r.type === 'step');
    expect(steps.map((r) => r.step)).toEqual([1, 2]);
    // The committed re-run used exactly the step's samples, and says what each peer reused.
    expect(steps[1]!.samples).toBe(sampleDigest([idsOf(1, 24)]));
    expect(steps[0]!.samples).toBe(sampleDigest([idsOf(0, 24)]));
    expect(steps[1]!.peers.map((p) => p.reused)).toEqual([sa!.length, sb!.length]);
    // The next step is a fresh plan without reuse.
    const next = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(next.map((a) => a.reuse)).toEqual([undefined, undefined]);
    h.d.stop();
  });

  it('a survivor that had applied the step still reuses its sum (it undoes the update itself); a checksum dissenter\'s ids are re-run', () => {
    const h = driverHarness({});
    const as = h.startRing(['a', 'b', 'c']);
    answer(h, 'a', as[0]!);
    answer(h, 'b', as[1]!);
    h.d.message('c', {
      type: 'step-result', peerId: 'c', generation: as[2]!.generation, step: 0, loss: 1, checksum: 'bad', timings: { computeMs: 10, commMs: 1, waitMs: 0 },
      images: as[2]!.sampleIds.length,
    });
    const again = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(again.map((a) => a.step)).toEqual([0, 0]);
    expect(again.map((a) => a.reuse?.count)).toEqual([as[0]!.sampleIds.length, as[1]!.sampleIds.length]);
    expect(sorted(again.flatMap((a) => a.sampleIds.slice(a.reuse!.count)))).toEqual(sorted(as[2]!.sampleIds));
    h.d.stop();
  });

  it('a second loss during the re-run: the re-run\'s slices (kept + extra) are kept in its generation, and the new loser\'s whole slice is shared', () => {
    const h = driverHarness({ globalBatch: 24 });
    const as = h.startRing(['a', 'b', 'c', 'd']);
    h.d.peerGone('d', 'killed');
    const r1 = ['a', 'b', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(r1.every((a) => a.reuse?.generation === as[0]!.generation)).toBe(true);
    answer(h, 'a', r1[0]!); // a finished (and applied) the re-run before c died
    h.d.peerGone('c', 'killed');
    const r2 = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(r2.map((a) => a.reuse)).toEqual([
      { generation: r1[0]!.generation, count: r1[0]!.sampleIds.length },
      { generation: r1[1]!.generation, count: r1[1]!.sampleIds.length },
    ]);
    expect(r2[0]!.sampleIds.slice(0, r1[0]!.sampleIds.length)).toEqual(r1[0]!.sampleIds);
    expect(sorted([...r2[0]!.sampleIds.slice(r1[0]!.sampleIds.length), ...r2[1]!.sampleIds.slice(r1[1]!.sampleIds.length)])).toEqual(sorted(r1[2]!.sampleIds));
    expect(sorted(r2.flatMap((a) => a.sampleIds))).toEqual(idsOf(0, 24));
    answer(h, 'a', r2[0]!);
    answer(h, 'b', r2[1]!);
    expect(h.records.filter((r) => r.type === 'step').map((r) => [r.step, r.samples])).toEqual([[1, sampleDigest([idsOf(0, 24)])]]);
    expect(h.records.filter((r) => r.type === 'abort').map((r) => r.step)).toEqual([1, 1]);
    h.d.stop();
  });

  it('a joiner arriving during the re-run waits for the step boundary; then it is admitted and the next step has no reuse', () => {
    const h = driverHarness({ checkpointEvery: 100 });
    let as = h.startRing(['a', 'b', 'c']);
    for (let i = 0; i < 3; i++) answer(h, ['a', 'b', 'c'][i]!, as[i]!);
    as = ['a', 'b', 'c'].map((id) => h.take(id, 'step-assignment'));
    h.d.peerGone('b', 'killed');
    const again = ['a', 'c'].map((id) => h.take(id, 'step-assignment'));
    h.d.peerConnected('j', null);
    expect(h.has('j', 'load-state')).toBe(false);
    expect(h.has('a', 'upload-checkpoint')).toBe(false);
    expect(h.d.status().ring).toEqual(['a', 'c']);
    answer(h, 'a', again[0]!);
    answer(h, 'c', again[1]!);
    expect(h.d.status().step).toBe(2);
    // Committed: now the joiner is admitted (the ring's first member uploads step 2 for it).
    expect(h.take('a', 'upload-checkpoint')).toEqual({ type: 'upload-checkpoint', step: 2 });
    h.d.checkpointStored('a', 2);
    expect(h.take('j', 'load-state')).toEqual({ type: 'load-state', source: 'checkpoint', step: 2 });
    h.ready('j', 2);
    const next = ['a', 'c', 'j'].map((id) => h.take(id, 'step-assignment'));
    expect(next.map((a) => [a.step, a.reuse])).toEqual([[2, undefined], [2, undefined], [2, undefined]]);
    expect(sorted(next.flatMap((a) => a.sampleIds))).toEqual(idsOf(2));
    h.d.stop();
  });

  it('rounds (syncEvery > 1) are unaffected: a lost member\'s round runs again with the survivors\' slices, no reuse field', () => {
    const h = driverHarness({ syncEvery: 2, steps: 4 });
    const as = h.startRing(['a', 'b', 'c']);
    expect(as.every((a) => a.round !== undefined && a.reuse === undefined)).toBe(true);
    h.d.peerGone('c', 'killed');
    const again = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(again.every((a) => a.round !== undefined && a.reuse === undefined && a.sampleIds.length === 0)).toBe(true);
    expect(again.map((a) => a.round!.ids)).toEqual([as[0]!.round!.ids, as[1]!.round!.ids]);
    answer(h, 'a', again[0]!);
    answer(h, 'b', again[1]!);
    const step = h.records.filter((r) => r.type === 'step');
    expect(step.map((r) => [r.step, r.samples])).toEqual([[2, undefined]]);
    h.d.stop();
  });

  it('planRerun: a ring member who was not in the aborted attempt means a fresh plan; a loss of an empty slice reuses everything', () => {
    const kept = keptSlices(5, 0, 7, ['a', 'b', 'c'], [[1, 2], [3, 4], []]);
    expect(planRerun(kept, ['a', 'x'], [1, 1])).toBeNull();
    expect(planRerun(kept, [], [])).toBeNull();
    expect(planRerun(kept, ['a', 'b'], [1, 1])).toEqual({
      slices: [[1, 2], [3, 4]], reuse: [{ generation: 7, count: 2 }, { generation: 7, count: 2 }], lost: [], extra: [0, 0],
    });
    // A survivor with an empty slice has nothing to reuse: no reuse, only extra ids.
    expect(planRerun(kept, ['c', 'a'], [1, 1])).toEqual({ slices: [[3], [1, 2, 4]], reuse: [null, { generation: 7, count: 2 }], lost: [3, 4], extra: [1, 1] });
    expect(sampleDigest([[3, 1], [2]])).toBe(sampleDigest([[1, 2, 3]]));
    expect(sampleDigest([[1, 2, 4]])).not.toBe(sampleDigest([[1, 2, 3]]));
  });
});

describe('the volunteer adds a kept sum only when the assignment names it exactly', () => {
  const kept = { step: 4, generation: 9, ids: [10, 11, 12] };
  const a = (o: Partial<StepAssignment>): Pick<StepAssignment, 'step' | 'sampleIds' | 'reuse'> => ({
    step: 4, sampleIds: [10, 11, 12, 40, 41], reuse: { generation: 9, count: 3 }, ...o,
  });
  it('matches step, generation and the exact leading ids; anything else computes from scratch', () => {
    expect(usableKept(kept, a({}))).toBe(kept);
    expect(usableKept(null, a({})), 'it joined later or restarted').toBeNull();
    expect(usableKept(kept, { step: 4, sampleIds: [10, 11, 12, 40] }), 'no reuse offered').toBeNull();
    expect(usableKept(kept, a({ step: 5 })), 'another step').toBeNull();
    expect(usableKept(kept, a({ reuse: { generation: 10, count: 3 } })), 'another generation: it kept the re-run\'s sum already (no double add)').toBeNull();
    expect(usableKept(kept, a({ reuse: { generation: 9, count: 2 } })), 'other ids').toBeNull();
    expect(usableKept(kept, a({ sampleIds: [10, 12, 11, 40] })), 'other ids in that place').toBeNull();
  });
});

describe('protocol: reuse and reused', () => {
  const assignment = { type: 'step-assignment', job: 1, generation: 3, step: 2, ring: ['a'], rank: 0, globalBatch: 8, sampleIds: [1, 2, 3], epoch: 0, seed: 1 };
  it('decodes a valid reuse and refuses a malformed one', () => {
    const ok = decodeCoordinatorMessage({ ...assignment, reuse: { generation: 2, count: 2 } });
    expect(ok.ok && ok.value.type === 'step-assignment' && ok.value.reuse).toEqual({ generation: 2, count: 2 });
    for (const reuse of [
      { generation: 2, count: 4 }, { generation: 2, count: 0 }, { generation: -1, count: 1 }, { generation: 2 }, { generation: 2, count: 1, ids: [1] }, 3,
    ]) {
      expect(decodeCoordinatorMessage({ ...assignment, reuse }).ok, JSON.stringify(reuse)).toBe(false);
    }
    expect(decodeCoordinatorMessage({ ...assignment, sampleIds: [], reuse: { generation: 2, count: 1 } }).ok).toBe(false);
  });
  it('a result\'s reused images are at most its images', () => {
    const r = { type: 'step-result', peerId: 'a', generation: 1, step: 0, loss: 1, checksum: 'ab', timings: { computeMs: 1, commMs: 1, waitMs: 0 }, images: 4 };
    expect(decodePeerMessage({ ...r, reused: 4 }).ok).toBe(true);
    expect(decodePeerMessage({ ...r, reused: 5 }).ok).toBe(false);
    expect(decodePeerMessage({ ...r, reused: -1 }).ok).toBe(false);
  });
});

describe('silence limits', () => {
  const l = { silentMs: 6000, firstSilentMs: 30_000 };
  it('a peer whose heartbeats flow is dropped after silentMs; one whose compute blocks gets 4x its gaps or 2x its work; ' +
    'unmeasured work gets firstSilentMs', () => {
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: 50, unmeasured: false }, l)).toBe(6000);
    expect(silenceLimitMs({ maxGap: 3000, maxWorkMs: 50, unmeasured: false }, l)).toBe(12_000);
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: 9000, unmeasured: false }, l)).toBe(18_000);
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: null, unmeasured: true }, l)).toBe(30_000);
    expect(silenceLimitMs({ maxGap: 20_000, maxWorkMs: null, unmeasured: true }, l)).toBe(80_000);
  });

  it("unmeasured work also gets 2x what the peer's own probe predicts, at most MOST_PROBED_FIRST x firstSilentMs; measured work does not", () => {
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: null, unmeasured: true, probedWorkMs: 10_000 }, l)).toBe(30_000);
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: null, unmeasured: true, probedWorkMs: 40_000 }, l)).toBe(80_000);
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: null, unmeasured: true, probedWorkMs: 1e9 }, l)).toBe(MOST_PROBED_FIRST * 30_000);
    expect(silenceLimitMs({ maxGap: 1000, maxWorkMs: 9000, unmeasured: false, probedWorkMs: 40_000 }, l)).toBe(18_000);
  });

  it("a member's first step: its probe's ms per image times its slice, in its limit and its ring's dead time", () => {
    const peers = new Map([
      ['slow', { ...newPeer('slow', 'slow', 0), state: 'member' as const, probeMsPerImage: 2500 }],
      ['q', { ...newPeer('q', 'q', 0), state: 'member' as const, maxGap: 100, maxWorkMs: 10 }],
    ]);
    const ph: RunningPhase = {
      kind: 'running', step: 0, steps: 1, generation: 1, ring: ['slow', 'q'], results: new Map(), started: 0, deadline: 0,
      slices: [Array.from({ length: 16 }, (_, i) => i), [99]], epoch: 0,
    };
    const none = () => false;
    // 16 images at 2.5 s: 40 s predicted, 80 s allowed; silent 70 s is not gone, 81 s is, and says its limit.
    expect(silentPeers(peers.values(), ph, none, l, 70_000).map((s) => s.id)).toEqual(['q']);
    expect(silentPeers(peers.values(), ph, none, l, 81_000)).toEqual([{ id: 'slow', limitMs: 80_000 }, { id: 'q', limitMs: 6000 }]);
    expect(ringDeadMs(ph, peers, none, l)).toBe(80_000 + RING_DEAD_MARGIN_MS);
  });

  it('a ring\'s dead time (StepAssignment.deadMs) is the longest any member may stay silent in the step, plus a margin', () => {
    const peer = (id: string, o: Partial<PeerRec>): PeerRec => ({ ...newPeer(id, id, 0), state: 'member', ...o });
    const peers = new Map([
      ['a', peer('a', { maxGap: 2000, maxWorkMs: 400, workPerImage: 10 })],
      ['b', peer('b', { maxGap: 1500, maxWorkMs: 300, workPerImage: 10 })],
      ['c', peer('c', { maxGap: 1000, maxWorkMs: null })],
    ]);
    const running = (ring: string[], slices: number[][]): RunningPhase => ({
      kind: 'running', step: 4, steps: 1, generation: 2, ring, results: new Map(), started: 0, deadline: 0, slices, epoch: 0,
    });
    const none = () => false;
    // a and b: 4 x 2 s of gaps is the longest: 8 s + 2 s.
    expect(ringDeadMs(running(['a', 'b'], [[1], [2]]), peers, none, l)).toBe(8000 + RING_DEAD_MARGIN_MS);
    // A slice of 800 images at 10 ms each: its compute may block for 2 x 8 s.
    expect(ringDeadMs(running(['a', 'b'], [Array.from({ length: 800 }, (_, i) => i), [2]]), peers, none, l)).toBe(16_000 + RING_DEAD_MARGIN_MS);
    // c's first step (nothing measured), or a's checkpoint upload: firstSilentMs.
    expect(ringDeadMs(running(['a', 'c'], [[1], [2]]), peers, none, l)).toBe(30_000 + RING_DEAD_MARGIN_MS);
    expect(ringDeadMs(running(['a', 'b'], [[1], [2]]), peers, (id) => id === 'a', l)).toBe(30_000 + RING_DEAD_MARGIN_MS);
    // Quick peers: silentMs at least.
    const quick = new Map([['q', peer('q', { maxGap: 100, maxWorkMs: 10 })]]);
    expect(ringDeadMs(running(['q'], [[1]]), quick, none, l)).toBe(6000 + RING_DEAD_MARGIN_MS);
    // A generation's first step: a neighbour may still be forming its other link, silent until formation's timeout.
    expect(ringDeadMs(running(['a', 'b'], [[1], [2]]), peers, none, l, true)).toBe(RING_FORM_TIMEOUT_MS + RING_DEAD_MARGIN_MS);
    // The job's ringFormMs where it gives one: longer or shorter than the default.
    expect(ringDeadMs(running(['a', 'b'], [[1], [2]]), peers, none, l, true, 20_000)).toBe(20_000 + RING_DEAD_MARGIN_MS);
    expect(ringDeadMs(running(['a', 'b'], [[1], [2]]), peers, none, l, true, 2_000)).toBe(8000 + RING_DEAD_MARGIN_MS); // its gaps rule
    expect(ringDeadMs(running(['a', 'c'], [[1], [2]]), peers, none, l, true)).toBe(30_000 + RING_DEAD_MARGIN_MS);
  });
});

describe('a silent member is noticed in seconds, a slow one is not evicted', () => {
  afterEach(() => { vi.useRealTimers(); });
  it('silent past silentMs after its steps were timed: dropped and its slice re-run; during its first (untimed) step it gets firstSilentMs', () => {
    vi.useFakeTimers();
    const h = driverHarness({}, {});
    const beat = (ids: string[]) => { for (const id of ids) h.d.message(id, { type: 'heartbeat', peerId: id, generation: 0, step: 0 }); };
    let as = h.startRing(['a', 'b', 'c']);
    // First step: nobody timed yet; c says nothing for 20 s (a first compute that blocks), a and b beat.
    for (let t = 0; t < 20; t++) { vi.advanceTimersByTime(1000); beat(['a', 'b']); }
    expect(h.d.status().ring, h.logs.join('\n')).toEqual(['a', 'b', 'c']);
    for (let i = 0; i < 3; i++) answer(h, ['a', 'b', 'c'][i]!, as[i]!);
    as = ['a', 'b', 'c'].map((id) => h.take(id, 'step-assignment'));
    beat(['c']);
    for (let t = 0; t < 5; t++) { vi.advanceTimersByTime(1000); beat(['a', 'b', 'c']); }
    expect(h.d.status().ring).toEqual(['a', 'b', 'c']);
    // A second ring whose peers never blocked: one silent for 7 s is dropped.
    const hb = driverHarness({}, {});
    const bs = hb.startRing(['x', 'y']);
    for (let i = 0; i < 2; i++) answer(hb, ['x', 'y'][i]!, bs[i]!);
    hb.take('x', 'step-assignment');
    hb.take('y', 'step-assignment');
    for (let t = 0; t < 5; t++) { vi.advanceTimersByTime(1000); hb.d.message('x', { type: 'heartbeat', peerId: 'x', generation: 0, step: 1 }); }
    expect(hb.d.status().ring).toEqual(['x', 'y']);
    vi.advanceTimersByTime(2000);
    hb.d.message('x', { type: 'heartbeat', peerId: 'x', generation: 0, step: 1 });
    // y, silent for 7 s (> silentMs 6 s) after its first step was timed at 10 ms: dropped, its slice re-run by x.
    expect(hb.d.status().ring).toEqual(['x']);
    const again = hb.take('x', 'step-assignment');
    expect(again.reuse?.count).toBeGreaterThan(0);
    expect(again.sampleIds.length).toBe(12);
    // Meanwhile in the first ring nobody beat for those 7 s: a and b (gaps of 1 s) are dropped
    // after silentMs; c, which showed a 20 s gap, gets 4x that and is still there.
    expect(h.d.status().ring).toEqual(['c']);
    expect(h.records.filter((r) => r.type === 'abort').map((r) => r.step)).toEqual([2]);
    h.d.stop();
    hb.d.stop();
  });
});

describe('audits of a verified re-run (sumPieces, auditMembers)', () => {
  it('a re-run\'s sum is the kept sum\'s pieces, then the ids computed now; unknown pieces exempt it from audits', () => {
    // d was lost: a and b reuse their kept sums of 2 and compute one of d's ids each; c reuses its whole sum.
    const kept = keptSlices(0, 0, 1, ['a', 'b', 'c', 'd'], [[1, 2], [3, 4], [5, 6], [7, 8]]);
    const lost = planRerun(kept, ['a', 'b', 'c'], [1, 1, 1])!;
    expect(lost.extra).toEqual([1, 1, 0]);
    const pieces = lost.slices.map((ids, rank) => sumPieces(ids.length, lost.reuse[rank]!.count, [2]));
    expect(pieces).toEqual([[2, 1], [2, 1], [2]]);
    expect(auditMembers([3, 3, 2], [8, undefined, 1], pieces, [2, 2, 2])).toEqual([
      { oneBatch: 3, microBatch: 8, pieces: [2, 1], reused: 2 }, { oneBatch: 3, pieces: [2, 1], reused: 2 }, { oneBatch: 2, microBatch: 1, reused: 2 },
    ]);
    // A fresh attempt is one piece; a second re-run keeps the first one's pieces; pieces that do not cover the reuse are unknown.
    expect(sumPieces(5, 0, [1, 1])).toEqual([5]);
    expect(sumPieces(4, 3, [2, 1])).toEqual([2, 1, 1]);
    expect(sumPieces(3, 3, [2, 1])).toEqual([2, 1]);
    expect(sumPieces(4, 3, undefined)).toBeNull();
    expect(sumPieces(4, 3, [2])).toBeNull();
    expect(auditMembers([4], [], [null], [3])).toEqual([{ oneBatch: 4, reusing: true, reused: 3 }]);
  });
});
