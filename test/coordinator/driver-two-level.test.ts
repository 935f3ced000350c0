// The driver's two-level generations (coordinator/two-level.ts), played with the driver harness
// (no sockets): from the job's twoLevelFrom peers on, every assignment carries the same topology,
// the ring is its groups one after the other (so ranks and rings agree), the signalling gate
// admits exactly the group and column neighbours, the plan follows the measured links, and a
// member lost mid-step is handled as in the flat ring (same step again, survivors reuse their
// kept sums, a new plan over the survivors, nobody honest evicted).
import { describe, expect, it } from 'vitest';
import { driverHarness, imagesOf } from './driver-harness.ts';
import { generationNeighbours, ringNeighbours } from '../../coordinator/signaling.ts';
import { MIN_BANDWIDTH_SAMPLE_BYTES, observeLinks, planGeneration } from '../../coordinator/two-level.ts';
import { checkTopology, roleOf, type Topology } from '../../src/comm/topology.ts';
import { type StepAssignment } from '../../src/protocol/messages.ts';
import { decodeCoordinatorMessage } from '../../src/protocol/decode.ts';

const IDS = ['a', 'b', 'c', 'd', 'e'];

/** The links each peer of `t` needs: group successor and predecessor, column successor and predecessor. */
function linksOf(t: Topology, id: string): Set<string> {
  const out = new Set<string>();
  const role = roleOf(t, id);
  for (const ids of [role.groupIds, role.columnIds ?? []]) {
    const i = ids.indexOf(id);
    if (ids.length < 2) continue;
    out.add(ids[(i + 1) % ids.length]!);
    out.add(ids[(i - 1 + ids.length) % ids.length]!);
  }
  return out;
}

function answer(h: ReturnType<typeof driverHarness>, id: string, a: StepAssignment, extra: { sentBytes?: number; link?: 'direct' | 'relayed' } = {}): void {
  h.d.message(id, {
    type: 'step-result', peerId: id, generation: a.generation, step: a.step, loss: 1, checksum: 'c0ffee', timings: { computeMs: 10, commMs: 1, waitMs: 0 },
    images: imagesOf(a), ...(a.reuse ? { reused: a.reuse.count } : {}), ...extra,
  });
}

describe('two-level generations', () => {
  it('from twoLevelFrom peers: every assignment carries one topology; ring = its groups in order; ranks agree; it decodes', () => {
    const h = driverHarness({ twoLevelFrom: 4 });
    const as = h.startRing(IDS);
    const t = as[0]!.topology;
    if (!t) throw new Error('no topology in the assignment');
    checkTopology(t);
    expect(t.groups.map((g) => g.length)).toEqual([2, 3]);
    for (const a of as) {
      expect(a.topology).toEqual(t);
      expect(a.ring).toEqual(t.groups.flat());
      expect(a.ring[a.rank]).toBe(IDS[as.indexOf(a)]);
      // The wire: JSON and back through the decoder.
      const d = decodeCoordinatorMessage(JSON.parse(JSON.stringify(a)));
      expect(d.ok && d.value.type === 'step-assignment' ? d.value.topology : null).toEqual(t);
    }
    expect(h.d.status().topology).toEqual(t);
    expect(h.d.status().ring).toEqual(t.groups.flat());
    h.d.stop();
  });

  it('the gate admits a peer\'s group and column neighbours, both ways, and no one else', () => {
    const h = driverHarness({ twoLevelFrom: 4 });
    h.startRing(IDS);
    const { ring, topology } = h.d.status();
    if (!topology) throw new Error('no topology');
    for (const x of IDS) {
      const want = linksOf(topology, x);
      for (const y of IDS) {
        expect(generationNeighbours(ring, topology, x, y), `${x} -> ${y}`).toBe(want.has(y));
        expect(generationNeighbours(ring, topology, y, x), `${y} -> ${x}`).toBe(want.has(y));
      }
    }
    // Groups [a, b], [c, d, e]; columns [a, c], [b, d]. Flat-ring neighbours that share no ring
    // of the plan are refused (b-c, e-a) ...
    expect(topology.groups).toEqual([['a', 'b'], ['c', 'd', 'e']]);
    for (const [x, y] of [['b', 'c'], ['e', 'a']] as const) {
      expect(ringNeighbours(ring, x, y)).toBe(true);
      expect(generationNeighbours(ring, topology, x, y), `${x} -> ${y}`).toBe(false);
    }
    expect(generationNeighbours(ring, topology, 'b', 'd')).toBe(true);
    expect(generationNeighbours(ring, topology, 'e', 'c')).toBe(true);
    // ... and a flat ring still gates as before.
    expect(generationNeighbours(['a', 'b', 'c', 'd'], null, 'a', 'c')).toBe(false);
    expect(generationNeighbours(['a', 'b', 'c', 'd'], null, 'a', 'd')).toBe(true);
    expect(generationNeighbours(ring, topology, 'a', 'stranger')).toBe(false);
    h.d.stop();
  });

  it('below twoLevelFrom, with twoLevelFrom 0, and by default below 16 peers: a flat ring, no topology', () => {
    for (const [config, n] of [[{ twoLevelFrom: 4 }, 3], [{ twoLevelFrom: 0 }, 20], [{}, 15]] as const) {
      const h = driverHarness({ ...config, globalBatch: 24 });
      const ids = Array.from({ length: n }, (_, i) => `p${i}`);
      const as = h.startRing(ids);
      expect(as.every((a) => a.topology === undefined), JSON.stringify(config)).toBe(true);
      expect(as[0]!.ring).toEqual(ids);
      expect(h.d.status().topology).toBeNull();
      h.d.stop();
    }
    const h = driverHarness({ globalBatch: 24 });
    const as = h.startRing(Array.from({ length: 16 }, (_, i) => `p${i}`));
    expect(as[0]!.topology?.groups.map((g) => g.length)).toEqual([4, 4, 4, 4]);
    h.d.stop();
  });

  it('the next generation keeps its groups while no slow peer sits before a fast one; else it follows the measured links', () => {
    const run = (relayed: string) => {
      const h = driverHarness({ twoLevelFrom: 4, globalBatch: 24 });
      const as = h.startRing(IDS);
      expect(as[0]!.topology?.groups).toEqual([['a', 'b'], ['c', 'd', 'e']]);
      // Step 1: one peer is relayed; among the rest, e sent fastest, then d, c, b, a.
      const MiB = 1 << 20;
      const bytes: Record<string, number> = { a: 1 * MiB, b: 2 * MiB, c: 3 * MiB, d: 4 * MiB, e: 9 * MiB };
      for (const a of as) {
        const id = a.ring[a.rank]!;
        answer(h, id, a, { sentBytes: bytes[id], link: id === relayed ? 'relayed' : 'direct' });
      }
      for (const id of IDS) h.take(id, 'step-assignment');
      // A new generation (a leaves).
      h.d.peerGone('a', 'closed');
      const again = ['b', 'c', 'd', 'e'].map((id) => h.take(id, 'step-assignment'));
      h.d.stop();
      return again[0]!;
    };
    // e relayed: the kept plan (b alone, evened out with e, the last of the largest group) has
    // it at its group's end: kept, so three of the four peers keep their neighbours.
    const kept = run('e');
    expect(kept.topology?.groups).toEqual([['b', 'e'], ['c', 'd']]);
    // c relayed would sit before d: planned again from the links, relayed last, then by bandwidth.
    const fresh = run('c');
    expect(fresh.topology?.groups).toEqual([['e', 'd'], ['b', 'c']]);
    expect(fresh.ring).toEqual(['e', 'd', 'b', 'c']);
  });

  it('a member lost mid two-level step: the same step again over the survivors, in two levels, with the kept sums; nobody honest evicted', () => {
    const h = driverHarness({ twoLevelFrom: 3, globalBatch: 24 });
    // Past the generation's first step (a link failing in it forms the ring again once: blame.ts formAgain).
    for (const a of h.startRing(['a', 'b', 'c', 'd'])) answer(h, a.ring[a.rank]!, a);
    const as = ['a', 'b', 'c', 'd'].map((id) => h.take(id, 'step-assignment'));
    const victim = as[0]!.ring[1]!;
    // Its neighbours notice first: their reports name it (a member), so it is the one evicted ...
    const reporter = as.find((a) => a.ring[a.rank] !== victim)!;
    h.d.message(reporter.ring[reporter.rank]!, {
      type: 'collective-failure', peerId: reporter.ring[reporter.rank]!, generation: reporter.generation, step: 1, failedPeerId: victim, kind: 'peer-closed',
    });
    expect(h.take(victim, 'evicted').reason).toMatch(/ring failed/);
    const survivors = ['a', 'b', 'c', 'd'].filter((id) => id !== victim);
    const again = survivors.map((id) => h.take(id, 'step-assignment'));
    // ... then the other survivors' reports of the old generation (passed-on aborts) are ignored.
    for (const a of as) {
      const id = a.ring[a.rank]!;
      if (id !== victim) h.d.message(id, { type: 'collective-failure', peerId: id, generation: a.generation, step: 1, failedPeerId: victim, kind: 'aborted' });
    }
    expect(h.sent.filter((s) => s.m.type === 'evicted').map((s) => s.to)).toEqual([]);
    expect(again.every((a) => a.step === 1 && a.generation === as[0]!.generation + 1)).toBe(true);
    const t = again[0]!.topology;
    if (!t) throw new Error('the re-run is not two-level');
    expect(t.groups.flat().sort()).toEqual([...survivors].sort());
    for (const a of again) {
      expect(a.ring).toEqual(t.groups.flat());
      // Each survivor's own slice first (its kept sum), by its id, whatever its new rank.
      const before = as.find((b) => b.ring[b.rank] === a.ring[a.rank])!;
      expect(a.reuse).toEqual({ generation: as[0]!.generation, count: before.sampleIds.length });
      expect(a.sampleIds.slice(0, before.sampleIds.length)).toEqual(before.sampleIds);
    }
    for (const a of again) answer(h, a.ring[a.rank]!, a);
    expect(h.d.status().step).toBe(2);
    expect(h.records.filter((r) => r.type === 'abort').map((r) => r.step)).toEqual([2]);
    h.d.stop();
  });
});

describe('two-level planning (pure)', () => {
  it('observeLinks: a running bandwidth from sentBytes / commMs of all-reduces of 1 MiB or more; relayed from either ring link', () => {
    const MiB = MIN_BANDWIDTH_SAMPLE_BYTES;
    expect(MiB).toBe(1 << 20);
    let o = observeLinks({}, { sentBytes: MiB, timings: { computeMs: 1, commMs: 10, waitMs: 0 }, linkPrev: 'relayed' });
    expect(o).toEqual({ bandwidth: 100 * MiB, relayed: true });
    o = observeLinks(o, { sentBytes: 2 * MiB, timings: { computeMs: 1, commMs: 10, waitMs: 0 }, link: 'direct', linkPrev: 'direct' });
    expect(o.relayed).toBe(false);
    expect(o.bandwidth).toBeCloseTo(0.7 * 100 * MiB + 0.3 * 200 * MiB);
    // A small all-reduce's time is latency and waiting, not bandwidth: nothing learnt of it.
    expect(observeLinks(o, { sentBytes: MiB - 1, timings: { computeMs: 1, commMs: 0.01, waitMs: 0 } })).toEqual(o);
    // Nothing sent (a ring of one), no link kinds: nothing learnt.
    expect(observeLinks(o, { timings: { computeMs: 1, commMs: 0, waitMs: 0 } })).toEqual(o);
  });

  it('planGeneration: flat below the threshold or with one group; else the plan\'s groups in order', () => {
    const none = () => undefined;
    expect(planGeneration(['a', 'b'], none, 2)).toEqual({ ring: ['a', 'b'], topology: null }); // round(sqrt 2) = 1 group
    expect(planGeneration(['x', 'a', 'b', 'c'], none, 0).topology).toBeNull();
    const p = planGeneration(['x', 'a', 'b', 'c'], none, 4);
    expect(p.topology?.groups).toEqual([['a', 'b'], ['c', 'x']]);
    expect(p.ring).toEqual(['a', 'b', 'c', 'x']);
  });
});
