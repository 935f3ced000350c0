import { describe, expect, it } from 'vitest';
import { adaptTopology } from '../../coordinator/stable-plan.ts';
import { planGeneration } from '../../coordinator/two-level.ts';
import { checkTopology, planTopology, type Topology } from '../../src/comm/topology.ts';
import { makeRng } from '../../src/rng.ts';

const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `p${String(i + from).padStart(3, '0')}`);
const none = () => undefined;

/** Directed links of a plan: each group's ring and each column's ring (what peers must connect). */
function edges(t: Topology): Set<string> {
  const out = new Set<string>();
  const ring = (r: readonly string[], tag: string) => {
    if (r.length < 2) return;
    r.forEach((id, i) => out.add(`${tag}:${id}>${r[(i + 1) % r.length]}`));
  };
  t.groups.forEach((g) => ring(g, 'group'));
  t.columns.forEach((c) => ring(c, 'column'));
  return out;
}
const kept = (a: Topology, b: Topology) => {
  const before = edges(a);
  return [...edges(b)].filter((e) => before.has(e)).length;
};

describe('stable generation plans', () => {
  const base = planTopology(ids(49).map((id) => ({ id })), { minTwoLevel: 16 });

  it('a leaver is replaced in place by its group\'s last member; nobody else moves', () => {
    const leaver = base.groups[2]![3]!;
    const t = adaptTopology(base, ids(49).filter((id) => id !== leaver), none)!;
    expect(t.groups[2]).toEqual([...base.groups[2]!.slice(0, 3), base.groups[2]![6]!, ...base.groups[2]!.slice(4, 6)]);
    for (const g of [0, 1, 3, 4, 5, 6]) expect(t.groups[g]).toEqual(base.groups[g]);
    checkTopology(t);
    // A fresh plan of the same peers, by contrast, keeps far fewer links.
    const fresh = planTopology(ids(49).filter((id) => id !== leaver).map((id) => ({ id })), { minTwoLevel: 16 });
    expect(kept(base, t)).toBeGreaterThan(kept(base, fresh));
    expect(edges(t).size - kept(base, t)).toBeLessThanOrEqual(8);
  });

  it('a joiner goes to the end of the smallest group', () => {
    const leaver = base.groups[4]![0]!;
    const smaller = adaptTopology(base, ids(49).filter((id) => id !== leaver), none)!;
    const t = adaptTopology(smaller, [...smaller.groups.flat(), 'new'], none)!;
    expect(t.groups[4]![t.groups[4]!.length - 1]).toBe('new');
    expect(t.groups.flat().sort()).toEqual([...smaller.groups.flat(), 'new'].sort());
  });

  it('groups are evened out to sizes that differ by at most one', () => {
    const gone = new Set(base.groups[0]!.slice(0, 4));
    const t = adaptTopology(base, ids(49).filter((id) => !gone.has(id)), none)!;
    const sizes = t.groups.map((g) => g.length);
    expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    checkTopology(t);
  });

  it('a fresh plan when the group count drifts two from round(sqrt N), or a relayed peer sits before a direct one', () => {
    const firstOf = (k: number) => base.groups.flatMap((g) => g.slice(0, k));
    expect(adaptTopology(base, firstOf(4), none)).toBeNull(); // 7 groups kept for 28 peers: round(sqrt 28) = 5
    expect(adaptTopology(base, firstOf(5), none)).not.toBeNull(); // 35 peers: 6, one away is kept
    const relayed = base.groups[1]![2]!;
    expect(adaptTopology(base, ids(49), (id) => (id === relayed ? { relayed: true } : undefined))).toBeNull();
    const last = base.groups[1]![6]!;
    expect(adaptTopology(base, ids(49), (id) => (id === last ? { relayed: true } : undefined))).not.toBeNull();
    // Slow by bandwidth: under half the median measured one; jitter among similar links is not.
    const slowId = base.groups[3]![1]!;
    const bw = (slowBw: number) => (id: string) => ({ bandwidth: id === slowId ? slowBw : 1e8 + (id.charCodeAt(3) % 7) * 1e6 });
    expect(adaptTopology(base, ids(49), bw(2e7))).toBeNull();
    expect(adaptTopology(base, ids(49), bw(0.9e8))).not.toBeNull();
    // planGeneration falls back to the fresh plan, which puts the relayed peer last.
    const p = planGeneration(ids(49), (id) => (id === relayed ? { relayed: true } : undefined), 16, base);
    expect(p.ring[p.ring.length - 1]).toBe(relayed);
  });

  it('under random joins and leaves every plan is valid, holds exactly the members, and keeps most links', () => {
    const rng = makeRng(5);
    let members = ids(50);
    let next = 50;
    let t = planGeneration(members, none, 16).topology!;
    let keptTotal = 0;
    let edgeTotal = 0;
    for (let change = 0; change < 300; change++) {
      if (rng.next() < 0.5 && members.length > 30) members = members.filter((_, i) => i !== rng.int(members.length));
      else members = [...members, ...ids(1 + rng.int(2), next)], next += 3;
      const p = planGeneration(members, none, 16, t);
      expect(p.topology).not.toBeNull();
      checkTopology(p.topology!);
      expect([...p.ring].sort()).toEqual([...members].sort());
      keptTotal += kept(t, p.topology!);
      edgeTotal += edges(p.topology!).size;
      t = p.topology!;
      members = p.ring;
    }
    expect(keptTotal / edgeTotal).toBeGreaterThan(0.85);
  });
});
