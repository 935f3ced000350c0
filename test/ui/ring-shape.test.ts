// The ring's shape on the dashboard (src/ui/ring-shape.ts): flat or two levels, read from a
// generation's record or event (older ones carry no plan; a malformed plan is not drawn), the
// drawing with its groups marked, and the driver's generation event carrying the plan.
import { describe, expect, it } from 'vitest';
import { planTopology, type Topology } from '../../src/comm/topology.ts';
import type { LiveEvent, RingPeer } from '../../src/protocol/messages.ts';
import { ringSvg } from '../../src/ui/charts.ts';
import { charts, emptyModel, fold, ringShapeLine } from '../../src/ui/dashboard.ts';
import { ringPlacement, ringShape, ringShapeText, topologyOf } from '../../src/ui/ring-shape.ts';
import { driverHarness } from '../coordinator/driver-harness.ts';

const ids = (n: number) => Array.from({ length: n }, (_, i) => `p${String(i).padStart(2, '0')}`);
const plan = (n: number, groups?: number): Topology => planTopology(ids(n).map((id) => ({ id })), { minTwoLevel: 2, ...(groups ? { groups } : {}) });
const peer = (id: string): RingPeer => ({ id, name: id, device: 'cpu' });

describe('ringShape and its words', () => {
  it('no ring, a single peer, a flat ring', () => {
    expect(ringShapeText(ringShape([], null))).toBe('no ring yet');
    expect(ringShapeText(ringShape(['a'], null))).toBe('a single peer (nothing to all-reduce)');
    expect(ringShape(ids(7), null)).toEqual({ kind: 'flat', peers: 7, groups: [7], columns: 0, outsideColumns: 0 });
    expect(ringShapeText(ringShape(ids(7), null))).toBe('flat ring of 7');
  });

  it('two levels of equal groups', () => {
    const t = plan(16);
    expect(ringShape(ids(16), t)).toEqual({ kind: 'two-level', peers: 16, groups: [4, 4, 4, 4], columns: 4, outsideColumns: 0 });
    expect(ringShapeText(ringShape(ids(16), t))).toBe('two levels: 4 groups of 4 peers, 4 columns');
  });

  it('two levels of unequal groups: the larger groups\' extra members are in no column', () => {
    const t = plan(17);
    expect(t.groups.map((g) => g.length)).toEqual([4, 4, 4, 5]);
    expect(ringShapeText(ringShape(t.groups.flat(), t))).toBe('two levels: 4 groups (3 of 4 peers, 1 of 5), 4 columns');
    expect(ringShape(t.groups.flat(), t).outsideColumns).toBe(1);
    const u = plan(7, 2);
    expect(ringShapeText(ringShape(u.groups.flat(), u))).toBe('two levels: 2 groups (1 of 3 peers, 1 of 4), 3 columns');
  });

  it('fits the ring drawing\'s 460 px subtitle (about 6.5 px a character) up to the largest ring', () => {
    for (const n of [16, 17, 100, 1000, 1024]) {
      const t = plan(n);
      expect(6.5 * ringShapeText(ringShape(t.groups.flat(), t)).length, `${n} peers`).toBeLessThan(440);
    }
  });

  it('a plan of one group is a flat ring', () => {
    expect(ringShape(['a', 'b'], { groups: [['a', 'b']], shards: 2, columns: [['a'], ['b']] }).kind).toBe('flat');
  });
});

describe('topologyOf: the plan as it came', () => {
  const t = plan(7, 2);
  const ring = t.groups.flat();

  it('absent: flat, no problem; a plan matching the ring: kept (a copy)', () => {
    expect(topologyOf(undefined, ring)).toEqual({ topology: null, problem: null });
    expect(topologyOf(null, ring)).toEqual({ topology: null, problem: null });
    const read = topologyOf(JSON.parse(JSON.stringify(t)), ring);
    expect(read).toEqual({ topology: t, problem: null });
  });

  it('a plan that is not this ring, or not a plan at all: not used, with the reason', () => {
    for (const bad of [{ ...t, groups: [...t.groups].reverse() }, { ...t, shards: 1 }, 'groups', [1, 2], { groups: t.groups }]) {
      const r = topologyOf(bad, ring);
      expect(r.topology).toBeNull();
      expect(r.problem).toMatch(/topology/);
    }
  });
});

describe('ringPlacement', () => {
  it('flat: each link to the next position, the last back to the first', () => {
    expect(ringPlacement(3, null)).toEqual([{ group: 0, next: 1 }, { group: 0, next: 2 }, { group: 0, next: 0 }]);
    expect(ringPlacement(0, null)).toEqual([]);
  });

  it('two levels: each link to the next member of its group, the last closing its group\'s ring', () => {
    const t = plan(7, 2);
    expect(ringPlacement(7, t).map((p) => p.group)).toEqual([0, 0, 0, 1, 1, 1, 1]);
    expect(ringPlacement(7, t).map((p) => p.next)).toEqual([1, 2, 0, 4, 5, 6, 3]);
  });
});

describe('the ring drawing with groups', () => {
  it('colours and labels each group; links close each group\'s ring; a group of two bows its two edges apart', () => {
    const t: Topology = { groups: [['a', 'b'], ['c', 'd', 'e']], shards: 2, columns: [['a', 'c'], ['b', 'd']] };
    const nodes = ringPlacement(5, t).map((p, i) => ({ label: 'abcde'[i]!, detail: '', share: 0.2, link: 'direct' as const, ...p }));
    const svg = ringSvg('ring', nodes, 460, ringShapeText(ringShape(t.groups.flat(), t)));
    expect(svg).toContain('>two levels: 2 groups (1 of 2 peers, 1 of 3), 2 columns<');
    expect([...svg.matchAll(/class="group-label"[^>]*>([^<]*)</g)].map((m) => m[1])).toEqual(['group 1', 'group 2']);
    expect(svg.match(/<circle class="group-0"/g)?.length).toBe(2);
    expect(svg.match(/<circle class="group-1"/g)?.length).toBe(3);
    const edges = [...svg.matchAll(/class="edge-direct" d="M([\d.]+),([\d.]+) Q([\d.]+),([\d.]+) ([\d.]+),([\d.]+)"/g)].map((m) => m.slice(1).map(Number));
    expect(edges.length).toBe(5);
    // e's link goes back to c (its group's first), not on to a.
    const at = (i: number) => edges[i]!.slice(0, 2);
    expect(edges[4]!.slice(4)).toEqual(at(2));
    // a -> b and b -> a share a chord: their control points lie on opposite sides.
    const [ab, ba] = [edges[0]!, edges[1]!];
    expect(Math.hypot(ab[2]! - ba[2]!, ab[3]! - ba[3]!)).toBeGreaterThan(50);
  });

  it('a flat ring draws as before: one colour, no group labels', () => {
    const svg = ringSvg('ring', ringPlacement(3, null).map((p, i) => ({ label: String(i), detail: '', share: 0.3, ...p })));
    expect(svg).not.toContain('group-label');
    expect(svg).not.toContain('class="group-');
    expect(svg.match(/class="edge-unknown"/g)?.length).toBe(3);
  });
});

describe('the dashboard reads the ring\'s shape from generations', () => {
  it('from the driver\'s own generation event (through JSON), then an older record without a plan, then a malformed one', () => {
    const h = driverHarness({ twoLevelFrom: 4 });
    h.startRing(['a', 'b', 'c', 'd', 'e']);
    h.d.stop();
    const gen = h.events.filter((e): e is Extract<LiveEvent, { type: 'generation' }> => e.type === 'generation').at(-1)!;
    expect(gen.topology).toEqual(h.d.status().topology);
    const rec = h.records.filter((r) => r.type === 'generation').at(-1)!;
    expect(rec.type === 'generation' ? rec.topology : null).toEqual(h.d.status().topology);

    const m = emptyModel(12);
    fold(m, JSON.parse(JSON.stringify(gen)) as LiveEvent, 0);
    expect(ringShapeLine(m)).toBe('two levels: 2 groups (1 of 2 peers, 1 of 3), 2 columns');
    const svg = charts(m).at(-1)!;
    expect(svg).toContain('group 2');
    expect(svg).toContain('>two levels: 2 groups');

    fold(m, { type: 'generation', time: 1, generation: gen.generation + 1, ring: ['a', 'b', 'c'], peers: ['a', 'b', 'c'].map(peer) });
    expect(m.topology).toBeNull();
    expect(ringShapeLine(m)).toBe('flat ring of 3');
    expect(charts(m).at(-1)!).not.toContain('group-label');

    fold(m, { ...gen, generation: gen.generation + 2, ring: ['e', 'd', 'c', 'b', 'a'] }, 0);
    expect(m.topology).toBeNull();
    expect(m.topologyProblem).toMatch(/ring in its order/);
    expect(ringShapeLine(m)).toBe('5 peers; their two-level plan could not be read');
  });

  it('a flat generation carries no plan (old readers see the same event as before)', () => {
    const h = driverHarness({ twoLevelFrom: 0 });
    h.startRing(['a', 'b', 'c']);
    h.d.stop();
    const gen = h.events.find((e) => e.type === 'generation')!;
    expect('topology' in gen).toBe(false);
    expect(h.records.some((r) => r.type === 'generation' && 'topology' in r)).toBe(false);
  });
});
