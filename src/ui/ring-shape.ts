// The shape of a generation's ring as the dashboard shows it: a flat ring of N, or two levels
// (coordinator/two-level.ts: G groups, each its own ring, and K columns joining the groups'
// shard owners), read from the generation's record or live event; and where each node of the
// ring drawing belongs (its group, and the group successor its ring link goes to).
import type { Topology } from '../comm/topology.ts';
import { readTopology } from '../protocol/topology.ts';

export interface RingShape {
  kind: 'none' | 'single' | 'flat' | 'two-level';
  peers: number;
  /** Group sizes in ring order; a flat ring is one group. */
  groups: number[];
  /** K: columns (shard owners in every group); 0 when flat. */
  columns: number;
  /** Members of the larger groups that own no shard, so take part in no column. */
  outsideColumns: number;
}

/**
 * A generation's topology as it came (a live event is parsed JSON, a metrics line is read as
 * found): a plan whose groups, one after the other, are the ring, or none. `problem` says why a
 * plan that was there is not used (the ring is then drawn flat, with the problem beside it).
 */
export function topologyOf(raw: unknown, ring: readonly string[]): { topology: Topology | null; problem: string | null } {
  if (raw === undefined || raw === null) return { topology: null, problem: null };
  const t = readTopology(raw, ring);
  return t.ok ? { topology: t.value, problem: null } : { topology: null, problem: t.problem };
}

export function ringShape(ring: readonly unknown[], topology: Topology | null): RingShape {
  const n = ring.length;
  if (topology && topology.groups.length > 1) {
    const groups = topology.groups.map((g) => g.length);
    return { kind: 'two-level', peers: n, groups, columns: topology.shards, outsideColumns: groups.reduce((a, s) => a + s - topology.shards, 0) };
  }
  return { kind: n === 0 ? 'none' : n === 1 ? 'single' : 'flat', peers: n, groups: n ? [n] : [], columns: 0, outsideColumns: 0 };
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The shape in words, short enough for the ring drawing's subtitle: "flat ring of 7", "two levels: 4 groups (3 of 4 peers, 1 of 5), 4 columns". */
export function ringShapeText(s: RingShape): string {
  if (s.kind === 'none') return 'no ring yet';
  if (s.kind === 'single') return 'a single peer (nothing to all-reduce)';
  if (s.kind === 'flat') return `flat ring of ${s.peers}`;
  const bySize = new Map<number, number>();
  for (const g of s.groups) bySize.set(g, (bySize.get(g) ?? 0) + 1);
  const sizes = [...bySize.entries()].sort((a, b) => a[0] - b[0]);
  const groups = sizes.length === 1
    ? `${plural(s.groups.length, 'group')} of ${sizes[0]![0]} peers`
    : `${plural(s.groups.length, 'group')} (${sizes.map(([size, count], i) => `${count} of ${size}${i ? '' : ' peers'}`).join(', ')})`;
  return `two levels: ${groups}, ${plural(s.columns, 'column')}`;
}

/**
 * Each ring position's group and the position its ring link goes to: in a two-level ring the
 * successor within its group (the last member's link closes the group's ring), else the next.
 */
export function ringPlacement(n: number, topology: Topology | null): { group: number; next: number }[] {
  if (!topology || topology.groups.length < 2) return Array.from({ length: n }, (_, i) => ({ group: 0, next: (i + 1) % n }));
  const out: { group: number; next: number }[] = [];
  let start = 0;
  topology.groups.forEach((g, group) => {
    for (let k = 0; k < g.length; k++) out.push({ group, next: start + ((k + 1) % g.length) });
    start += g.length;
  });
  return out;
}
