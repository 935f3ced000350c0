// planTopology: deterministic, groups of about sqrt(N) (unequal when N is not a multiple),
// fast peers together, relayed / slow peers in the last group and at a ring's end.
import { describe, expect, it } from 'vitest';
import { RingError, checkTopology, flatRounds, planTopology, roleOf, twoLevelRounds, type PeerLinkInfo, type Topology } from '../../src/comm/index.ts';
import { randomGrad } from './helpers.ts';

/** n peers with pseudo-random bandwidths; the ids listed in `relayed` go through TURN. */
function peers(n: number, seed: number, relayed: readonly number[] = []): PeerLinkInfo[] {
  const r = randomGrad(2 * n, seed);
  return Array.from({ length: n }, (_, i) => ({
    id: `p${i}`, bandwidth: Math.round(50e6 * (1.1 + r[i])), latencyMs: Math.round(20 * (1.1 + r[n + i])), relayed: relayed.includes(i),
  }));
}

function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const r = randomGrad(xs.length, seed);
  return xs.map((x, i) => ({ x, k: r[i] })).sort((a, b) => a.k - b.k).map((e) => e.x);
}

const sizes = (t: Topology) => t.groups.map((g) => g.length);

describe('planTopology', () => {
  it('is a pure function of the peers: the same plan whatever the order they are listed in', () => {
    const ps = peers(17, 5, [3, 11]);
    const t = planTopology(ps);
    for (let s = 0; s < 5; s++) expect(planTopology(shuffled(ps, 100 + s))).toEqual(t);
    checkTopology(t);
  });

  it('below 16 peers one flat ring; from 16 about sqrt(N) groups of K or K+1', () => {
    expect(sizes(planTopology(peers(15, 1)))).toEqual([15]);
    expect(sizes(planTopology(peers(16, 1)))).toEqual([4, 4, 4, 4]);
    expect(sizes(planTopology(peers(17, 1)))).toEqual([4, 4, 4, 5]);
    expect(sizes(planTopology(peers(30, 1)))).toEqual([6, 6, 6, 6, 6]);
    expect(sizes(planTopology(peers(40, 1)))).toEqual([6, 6, 7, 7, 7, 7]);
    expect(sizes(planTopology(peers(8, 1), { groups: 3 }))).toEqual([2, 3, 3]);
    expect(sizes(planTopology(peers(12, 1), { groups: 3 }))).toEqual([4, 4, 4]);
    expect(sizes(planTopology(peers(9, 1), { minTwoLevel: 4 }))).toEqual([3, 3, 3]);
  });

  it('every peer once; K shards; column j = member j of each group; roles', () => {
    for (const n of [16, 17, 23, 64, 100]) {
      const t = planTopology(peers(n, n));
      const all = t.groups.flat();
      expect(new Set(all).size).toBe(n);
      expect(t.shards).toBe(Math.min(...sizes(t)));
      checkTopology(t);
      for (const id of all) {
        const role = roleOf(t, id);
        expect(role.groupIds[role.groupRank]).toBe(id);
        if (role.shard === null) expect(role.groupRank).toBeGreaterThanOrEqual(t.shards);
        else expect(role.columnIds?.[role.group]).toBe(id);
      }
    }
  });

  it('O(sqrt N) rounds: 16 peers 12 rounds (flat 30), 100 peers 36 (flat 198)', () => {
    expect([twoLevelRounds(planTopology(peers(16, 2))), flatRounds(16)]).toEqual([12, 30]);
    expect([twoLevelRounds(planTopology(peers(17, 2))), flatRounds(17)]).toEqual([14, 32]);
    expect([twoLevelRounds(planTopology(peers(100, 2))), flatRounds(100)]).toEqual([36, 198]);
    for (let n = 16; n <= 400; n += 17) expect(twoLevelRounds(planTopology(peers(n, n)))).toBeLessThanOrEqual(4 * Math.ceil(Math.sqrt(n)) + 2);
  });

  it('groups fast peers together: each group is a band of the speed order', () => {
    const ps = peers(25, 9);
    const t = planTopology(ps);
    const bw = new Map(ps.map((p) => [p.id, p.bandwidth ?? 0]));
    for (let g = 1; g < t.groups.length; g++) {
      const slowestBefore = Math.min(...t.groups[g - 1].map((id) => bw.get(id) ?? 0));
      const fastestHere = Math.max(...t.groups[g].map((id) => bw.get(id) ?? 0));
      expect(fastestHere).toBeLessThanOrEqual(slowestBefore);
    }
    // Inside a group the ring runs fastest to slowest.
    for (const grp of t.groups) for (let i = 1; i < grp.length; i++) expect(bw.get(grp[i])).toBeLessThanOrEqual(bw.get(grp[i - 1]) ?? 0);
  });

  it('relayed peers get their own group, or sit together at a ring end, never between two direct peers', () => {
    // 17 peers, 5 relayed (the fastest ones by bandwidth): exactly the last group (K+1 = 5).
    const t17 = planTopology(peers(17, 3, [0, 4, 8, 12, 16]));
    expect([...t17.groups[3]].sort()).toEqual(['p0', 'p12', 'p16', 'p4', 'p8']);
    // 16 peers, 2 relayed: both in the last group, at its ring's end, next to each other.
    const ps = peers(16, 4, [1, 9]);
    const t = planTopology(ps);
    const relayed = new Set(['p1', 'p9']);
    for (const grp of t.groups) {
      const at = grp.map((id, i) => (relayed.has(id) ? i : -1)).filter((i) => i >= 0);
      // A suffix of the ring order: the relayed members touch at most two direct peers.
      expect(at).toEqual(at.map((_, i) => grp.length - at.length + i));
    }
    expect(t.groups[3].slice(-2).sort()).toEqual(['p1', 'p9']);
    // The extra member of a larger group (owns no shard, joins no column) is its slowest.
    const t18 = planTopology(peers(18, 6, [2]));
    const extra = t18.groups.filter((g) => g.length > t18.shards).map((g) => g[g.length - 1]);
    expect(extra).toContain('p2');
    expect(roleOf(t18, 'p2')).toMatchObject({ shard: null, columnIds: null });
  });

  it('unmeasured peers sort after measured ones, then by id', () => {
    const t = planTopology([{ id: 'b' }, { id: 'a' }, { id: 'c', bandwidth: 1 }], { groups: 1 });
    expect(t.groups[0]).toEqual(['c', 'a', 'b']);
  });

  it('refuses what it cannot plan, with the peer named', () => {
    expect(() => planTopology([])).toThrow(RingError);
    expect(() => planTopology([{ id: 'a' }, { id: 'a' }])).toThrow(/listed twice/);
    expect(() => planTopology([{ id: 'a', bandwidth: Number.NaN }])).toThrow(/"a" has bandwidth NaN/);
    expect(() => planTopology(peers(4, 1), { groups: 5 })).toThrow(/5 groups for 4 peers/);
    expect(() => roleOf(planTopology(peers(4, 1)), 'zz')).toThrow(/not in the topology/);
    expect(() => checkTopology({ groups: [['a', 'b'], ['c']], shards: 2, columns: [['a', 'c'], ['b']] })).toThrow(/shards 2/);
  });
});
