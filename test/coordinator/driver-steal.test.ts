// Work stealing at a step's end (coordinator/tail-pool.ts) in the driver: each slice's last part
// waits as the step's tail and goes in chunks to the members that claim it; the step commits the
// sampler's ids exactly; a result that does not cover its fixed part and grants is refused; an
// abort re-runs what every member held (fixed + granted) and what was never granted. Played with
// the driver harness (no sockets); the pure parts and the protocol fields are checked here too.
import { describe, expect, it } from 'vitest';
import { N_TRAIN, claim, drain, driverHarness, report } from './driver-harness.ts';
import { sampleDigest, keptSlices, planRerun } from '../../coordinator/slice-rerun.ts';
import { autoChunk, grantNext, slicesWithGrants, splitTail, tailResultProblem, type TailPool } from '../../coordinator/tail-pool.ts';
import { parseJobConfig, JobError } from '../../coordinator/job.ts';
import { stepSamples } from '../../src/train/sampler.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';
import { decodeCoordinatorMessage, decodePeerMessage } from '../../src/protocol/decode.ts';

const sorted = (ids: readonly number[]): number[] => [...ids].sort((a, b) => a - b);
const idsOf = (step: number, B: number): number[] => sorted(stepSamples(9, step, B, N_TRAIN).ids);

/**
 * Members computing at `rate` images / ms claim the pool as volunteer-train.ts does (the first
 * claim as they start, then one as each grant comes, a chunk computed once the next one came, no
 * latency): when each ends its step, how many images it computed and how long its last
 * micro-batch (the one the all-reduce overlaps) ran.
 */
function simulateClaims(pool: TailPool, members: { id: string; rate: number; fixed: number }[]): { id: string; end: number; images: number; lastMs: number }[] {
  const st = members.map((m) => ({
    ...m, t: m.fixed / m.rate, pending: 0, next: grantNext(pool, m.id, 0), end: null as number | null, images: m.fixed, lastMs: 0,
  }));
  for (let guard = 0; guard < 100_000; guard++) {
    const open = st.filter((m) => m.end === null);
    if (open.length === 0) break;
    const m = open.reduce((a, b) => (b.t < a.t ? b : a));
    const g = m.next;
    if (g.ids.length === 0 || g.last) {
      m.images += g.ids.length;
      m.lastMs = (m.pending + g.ids.length) / m.rate;
      m.end = m.t + m.lastMs;
      continue;
    }
    m.images += g.ids.length;
    m.next = grantNext(pool, m.id, m.t);
    m.t += m.pending / m.rate;
    m.pending = g.ids.length;
  }
  return st.map((m) => ({ id: m.id, end: m.end ?? Infinity, images: m.images, lastMs: m.lastMs }));
}

describe('the tail pool (pure)', () => {
  it('keeps back floor(fraction x length) of each slice, in rank order; a ring of one or nothing to keep back: no tail', () => {
    const s = splitTail([[1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12], [13]], { fraction: 0.25 })!;
    expect(s.fixed).toEqual([[1, 2, 3, 4, 5, 6], [9, 10, 11], [13]]);
    expect(s.pool.left).toEqual([7, 8, 12]);
    expect(s.pool.chunk).toBe(autoChunk(3, 3));
    expect(splitTail([[1, 2, 3, 4]], { fraction: 0.5 })).toBeNull();
    expect(splitTail([[1], [2]], { fraction: 0.5 })).toBeNull();
    expect(() => splitTail([[1], [2]], { fraction: 0.8 })).toThrow(RangeError);
    expect(() => splitTail([[1], [2]], { fraction: 0.2, chunk: 0 })).toThrow(RangeError);
    expect(autoChunk(3277, 64)).toBe(6);
    expect(autoChunk(3, 8)).toBe(1);
    // With a measured speed: 40 ms of the median member's compute, at most an eighth of a share.
    expect(autoChunk(16_384, 64, 250)).toBe(10);
    expect(autoChunk(16_384, 64, 1e6)).toBe(32);
  });

  it('grants chunks in order until the tail is gone; a member is drained only by an empty grant; slices are fixed + grants', () => {
    const s = splitTail([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]], { fraction: 0.5, chunk: 2 })!;
    expect(s.pool.left).toEqual([4, 5, 6, 10, 11, 12]);
    const ids = (g: { ids: number[]; last: boolean }) => g.ids;
    expect(ids(grantNext(s.pool, 'b'))).toEqual([4, 5]);
    expect(ids(grantNext(s.pool, 'b'))).toEqual([6, 10]);
    expect(ids(grantNext(s.pool, 'a'))).toEqual([11, 12]);
    expect(tailResultProblem(s.pool, 'a', 3, 5, 2)).toMatch(/before the tail was gone/);
    expect(grantNext(s.pool, 'a')).toEqual({ ids: [], last: false });
    expect(tailResultProblem(s.pool, 'a', 3, 5, 2)).toBeNull();
    expect(tailResultProblem(s.pool, 'a', 3, 3, 0)).toMatch(/3 images \(0 claimed\) where it holds 3 \+ 2 granted/);
    expect(slicesWithGrants(['a', 'b'], s.fixed, s.pool)).toEqual([[1, 2, 3, 11, 12], [7, 8, 9, 4, 5, 6, 10]]);
  });

  it('final grants: once the tail left would last the overlap window, each member gets a share in proportion to its rate in this step, flagged last', () => {
    const s = splitTail(
      [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]], { fraction: 0.5, chunk: 2 }, ['a', 'b'], { windowMs: 1000 },
    )!;
    expect(s.pool.left).toEqual([7, 8, 9, 10, 11, 12, 19, 20, 21, 22, 23, 24]);
    // First claims go out before anything is computed: plain chunks.
    expect(grantNext(s.pool, 'a', 1000)).toEqual({ ids: [7, 8], last: false });
    expect(grantNext(s.pool, 'b', 1000)).toEqual({ ids: [9, 10], last: false });
    // a is done with its fixed part; b's rate is not known yet: a chunk keeps a busy.
    expect(grantNext(s.pool, 'a', 1100)).toEqual({ ids: [11, 12], last: false });
    // Rates from each member's first claim (its compute start) to its latest: b did 6 images in
    // 300 ms (0.02 / ms), a 6 + 2 in 100 ms (0.08 / ms). 6 left and a chunk in flight at each:
    // D = (6 + 2 + 2) / 0.1 = 100 ms each, so b's final grant is 0.02 x 100 - 2 = 0, at least 1.
    expect(grantNext(s.pool, 'b', 1300)).toEqual({ ids: [19], last: true });
    expect(tailResultProblem(s.pool, 'b', 6, 9, 3)).toBeNull();
    // a is the last member without its final grant: it takes the rest.
    expect(grantNext(s.pool, 'a', 1320)).toEqual({ ids: [20, 21, 22, 23, 24], last: true });
    expect(s.pool.left).toEqual([]);
    expect(grantNext(s.pool, 'a', 1330), 'a drained member claims nothing more').toEqual({ ids: [], last: false });
  });

  it('members at different speeds claiming as volunteers do end their steps together; ' +
    'with a window, each one\'s last micro-batch lasts about the window', () => {
    // Three members at 0.06, 0.06 and 0.04 images / ms (the last slowed in this step: its slice
    // was cut for the speed it had before), 96 images each, half kept back, chunks of 2.
    const run = (windowMs: number) => {
      const rates = { c: 0.06, d: 0.06, e: 0.04 };
      const ids = Object.keys(rates);
      const slices = ids.map((_, k) => Array.from({ length: 96 }, (_, i) => k * 96 + i));
      const { fixed, pool } = splitTail(slices, { fraction: 0.5, chunk: 2 }, ids, { windowMs })!;
      return simulateClaims(pool, ids.map((id, k) => ({ id, rate: rates[id as keyof typeof rates], fixed: fixed[k]!.length })));
    };
    for (const windowMs of [0, 300]) {
      const m = run(windowMs);
      const ends = m.map((x) => x.end);
      expect(m.reduce((n, x) => n + x.images, 0)).toBe(288);
      const text = `W ${windowMs}: ends ${ends.map((e) => e.toFixed(0)).join(', ')}, images ${m.map((x) => x.images).join(', ')}, ` +
        `last ${m.map((x) => x.lastMs.toFixed(0)).join(', ')} ms`;
      // Within about two chunks of the slow member's: 2 x 2 / 0.04 = 100 ms.
      expect(Math.max(...ends) - Math.min(...ends), text).toBeLessThan(100);
      expect(m[2]!.images, `the slow member computes less: ${text}`).toBeLessThan(m[0]!.images);
      // Without stealing the slow one would end at 96 / 0.04 = 2400 ms; the ring's 288 images at 0.16 / ms take 1,800.
      expect(Math.max(...ends), text).toBeLessThan(1900);
      if (windowMs > 0) for (const x of m) expect(x.lastMs, `${x.id}'s last micro-batch: ${text}`).toBeGreaterThan(windowMs / 2);
      else for (const x of m) expect(x.lastMs, text).toBeLessThanOrEqual(2 / 0.04 + 1);
    }
  });

  it('a re-run counts the ids never granted as lost: the survivors share them with a lost member\'s', () => {
    const kept = keptSlices(3, 0, 5, ['a', 'b', 'c'], [[1, 2, 9], [3, 4], [5, 6]], [7, 8]);
    const plan = planRerun(kept, ['a', 'b'], [1, 1])!;
    expect(sorted(plan.lost)).toEqual([5, 6, 7, 8]);
    expect(plan.slices[0]!.slice(0, 3)).toEqual([1, 2, 9]);
    expect(plan.reuse).toEqual([{ generation: 5, count: 3 }, { generation: 5, count: 2 }]);
    expect(sorted(plan.slices.flat())).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Nobody lost, the tail not all granted: the orphans alone are re-run.
    const same = planRerun(kept, ['a', 'b', 'c'], [1, 1, 1])!;
    expect(sorted(same.lost)).toEqual([7, 8]);
  });
});

describe('work stealing in the driver', () => {
  it('assignments carry the fixed parts and the chunk; a fast member takes the tail; the step commits the sampler\'s ids', () => {
    const h = driverHarness({ globalBatch: 24, stealFraction: 0.5, stealChunk: 2 });
    const as = h.startRing(['a', 'b', 'c']);
    expect(as.map((a) => a.steal)).toEqual([{ chunk: 2 }, { chunk: 2 }, { chunk: 2 }]);
    expect(as.map((a) => a.sampleIds.length)).toEqual([4, 4, 4]);
    // a is fast: it drains the whole tail; b and c claim once it is gone.
    const byA = drain(h, 'a', as[0]!);
    expect(byA.length).toBe(12);
    expect(claim(h, 'b', as[1]!)).toEqual([]);
    expect(claim(h, 'c', as[2]!)).toEqual([]);
    expect(sorted([...as.flatMap((a) => a.sampleIds), ...byA])).toEqual(idsOf(0, 24));
    report(h, 'a', as[0]!, byA.length);
    report(h, 'b', as[1]!, 0);
    report(h, 'c', as[2]!, 0);
    expect(h.d.status().step).toBe(1);
    const rec = h.records.find((r) => r.type === 'step');
    expect(rec?.type === 'step' && rec.samples).toBe(sampleDigest([idsOf(0, 24)]));
    expect(rec?.type === 'step' && rec.peers.map((p) => [p.images, p.claimed])).toEqual([[16, 12], [4, undefined], [4, undefined]]);
    h.d.stop();
  });

  it('a claim for another step or generation, or from a member that reported, gets an empty grant', () => {
    const h = driverHarness({ globalBatch: 24, stealFraction: 0.5, stealChunk: 2 });
    const as = h.startRing(['a', 'b']);
    expect(claim(h, 'a', { ...as[0]!, step: 5 })).toEqual([]);
    expect(claim(h, 'a', { ...as[0]!, generation: as[0]!.generation + 1 })).toEqual([]);
    const g = drain(h, 'b', as[1]!);
    expect(claim(h, 'a', as[0]!)).toEqual([]);
    report(h, 'b', as[1]!, g.length);
    expect(claim(h, 'b', as[1]!)).toEqual([]);
    report(h, 'a', as[0]!, 0);
    expect(h.d.status().step).toBe(1);
    h.d.stop();
  });

  it('a result before the tail ran dry, or that does not cover fixed + granted, evicts its sender and the step runs again', () => {
    const h = driverHarness({ globalBatch: 24, stealFraction: 0.5, stealChunk: 2 });
    const as = h.startRing(['a', 'b', 'c']);
    claim(h, 'a', as[0]!);
    report(h, 'a', as[0]!, 2);
    const ev = h.take('a', 'evicted');
    expect(ev.reason).toMatch(/before the tail was gone/);
    // b and c run the step again (a's ids among theirs), and b then claims but reports too few images.
    const again = ['b', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(sorted(again.flatMap((x) => x.sampleIds))).toEqual(idsOf(0, 24));
    h.d.stop();
    const h2 = driverHarness({ globalBatch: 24, stealFraction: 0.5, stealChunk: 2 });
    const bs = h2.startRing(['a', 'b']);
    const got = drain(h2, 'a', bs[0]!);
    report(h2, 'a', bs[0]!, got.length, bs[0]!.sampleIds.length);
    expect(h2.take('a', 'evicted').reason).toMatch(/holds 6 \+ 12 granted/);
    h2.d.stop();
  });

  it('without a tail, a result whose image count is not its slice\'s evicts its sender (the count weighs its result)', () => {
    const h = driverHarness({ globalBatch: 24, stealFraction: 0 });
    const as = h.startRing(['a', 'b', 'c']);
    expect(as.map((a) => a.steal)).toEqual([undefined, undefined, undefined]);
    h.d.message('a', {
      type: 'step-result', peerId: 'a', generation: as[0]!.generation, step: as[0]!.step, loss: 1, checksum: 'c0ffee',
      timings: { computeMs: 10, commMs: 1, waitMs: 0 }, images: 1,
    });
    expect(h.take('a', 'evicted').reason).toMatch(/reported 1 images where its slice holds 8/);
    const again = ['b', 'c'].map((id) => h.take(id, 'step-assignment'));
    expect(sorted(again.flatMap((x) => x.sampleIds))).toEqual(idsOf(0, 24));
    h.d.stop();
  });

  it('an abort re-runs every member\'s fixed part and grants (reused) and the never-granted tail: the re-run commits the sampler\'s ids', () => {
    const h = driverHarness({ globalBatch: 24, stealFraction: 0.5, stealChunk: 2 });
    const as = h.startRing(['a', 'b', 'c']);
    const ga = claim(h, 'a', as[0]!);
    const gc = claim(h, 'c', as[2]!);
    h.d.peerGone('c', 'killed');
    const again = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(again.map((a) => a.steal), 'a re-run has no tail').toEqual([undefined, undefined]);
    expect(again[0]!.reuse).toEqual({ generation: as[0]!.generation, count: as[0]!.sampleIds.length + ga.length });
    expect(again[0]!.sampleIds.slice(0, as[0]!.sampleIds.length + ga.length)).toEqual([...as[0]!.sampleIds, ...ga]);
    expect(again[1]!.reuse).toEqual({ generation: as[1]!.generation, count: as[1]!.sampleIds.length });
    expect(gc.length).toBe(2);
    expect(sorted(again.flatMap((a) => a.sampleIds))).toEqual(idsOf(0, 24));
    for (const [i, id] of ['a', 'b'].entries()) h.d.message(id, {
      type: 'step-result', peerId: id, generation: again[i]!.generation, step: 0, loss: 1, checksum: 'c0ffee', timings: { computeMs: 10, commMs: 1, waitMs: 0 },
      images: again[i]!.sampleIds.length, reused: again[i]!.reuse!.count,
    });
    expect(h.d.status().step).toBe(1);
    const rec = h.records.find((r) => r.type === 'step');
    expect(rec?.type === 'step' && rec.samples).toBe(sampleDigest([idsOf(0, 24)]));
    // The next fresh step has a tail again.
    const next = ['a', 'b'].map((id) => h.take(id, 'step-assignment'));
    expect(next.map((a) => a.steal)).toEqual([{ chunk: 2 }, { chunk: 2 }]);
    h.d.stop();
  });

  it('job: stealFraction "auto" (the default), 0 (off) or in (0, 0.75], stealChunk not with 0, not with shard-local sampling; ' +
    'the protocol fields decode', () => {
    const base = { model: 'small-cnn', dataset: 'mnist', globalBatch: 24, steps: 10, optimizer: { kind: 'lars', lr: 1 } };
    expect(parseJobConfig({ ...base, stealFraction: 0.1 }, N_TRAIN).steal).toEqual({ fraction: 0.1 });
    expect(parseJobConfig({ ...base, stealFraction: 0.1, stealChunk: 3 }, N_TRAIN).steal).toEqual({ fraction: 0.1, chunk: 3 });
    expect(parseJobConfig(base, N_TRAIN).steal).toEqual({ fraction: 0.75, auto: true });
    expect(parseJobConfig({ ...base, stealFraction: 'auto', stealChunk: 3 }, N_TRAIN).steal).toEqual({ fraction: 0.75, auto: true, chunk: 3 });
    expect(parseJobConfig({ ...base, stealChunk: 3 }, N_TRAIN).steal).toEqual({ fraction: 0.75, auto: true, chunk: 3 });
    expect(parseJobConfig({ ...base, stealFraction: 0 }, N_TRAIN).steal).toBeUndefined();
    // Shard-local sampling keeps ids on their shards: no stealing unless asked, and then refused.
    expect(parseJobConfig({ ...base, sampling: 'shard-local' }, N_TRAIN).steal).toBeUndefined();
    expect(() => parseJobConfig({ ...base, stealFraction: 0.8 }, N_TRAIN)).toThrow(JobError);
    expect(() => parseJobConfig({ ...base, stealFraction: 'sometimes' }, N_TRAIN)).toThrow(
      /stealFraction must be "auto" or a number in \[0, 0.75\] \(0: never steal\), got "sometimes"/,
    );
    expect(() => parseJobConfig({ ...base, stealFraction: 0, stealChunk: 3 }, N_TRAIN)).toThrow(/stealFraction 0 turns off: drop it/);
    expect(() => parseJobConfig({ ...base, stealFraction: 0.1, sampling: 'shard-local' }, N_TRAIN)).toThrow(/shard-local/);
    expect(() => parseJobConfig({ ...base, stealFraction: 'auto', sampling: 'shard-local' }, N_TRAIN)).toThrow(/shard-local/);
    expect(() => parseJobConfig({ ...base, stealChunk: 3, sampling: 'shard-local' }, N_TRAIN)).toThrow(/shard-local/);
    expect(
      decodePeerMessage({ type: 'claim', peerId: 'p1', generation: 2, step: 3 }),
    ).toEqual({ ok: true, value: { type: 'claim', peerId: 'p1', generation: 2, step: 3 } });
    expect(decodeCoordinatorMessage({ type: 'grant', generation: 2, step: 3, ids: [4, 5] }).ok).toBe(true);
    expect(decodeCoordinatorMessage({ type: 'grant', generation: 2, step: 3, ids: [-1] }).ok).toBe(false);
    const a = { type: 'step-assignment', job: 1, generation: 1, step: 0, ring: ['p1', 'p2'], rank: 0, globalBatch: 8, sampleIds: [1, 2], epoch: 0, seed: 1 };
    expect(decodeCoordinatorMessage({ ...a, steal: { chunk: 2 } }).ok).toBe(true);
    expect(decodeCoordinatorMessage({ ...a, steal: { chunk: 9 } }).ok, 'a chunk over the batch').toBe(false);
    expect(decodeCoordinatorMessage({ ...a, steal: { chunk: 2 }, reuse: { generation: 0, count: 1 } }).ok, 'steal with reuse').toBe(false);
    const r = {
      type: 'step-result', peerId: 'p1', generation: 1, step: 0, loss: 1, checksum: 'ab', timings: { computeMs: 1, commMs: 1, waitMs: 0 }, images: 4,
    };
    expect(decodePeerMessage({ ...r, claimed: 2 }).ok).toBe(true);
    expect(decodePeerMessage({ ...r, claimed: 5 }).ok, 'more claimed than images').toBe(false);
  });
});
