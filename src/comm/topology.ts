// Two-level topology for large rings: a pure function of the peers' measured links, so the
// coordinator computes it once and every peer receives the same plan.
//
// A flat ring pays 2(N-1) message latencies per all-reduce. Here the N peers are cut into G
// groups of about sqrt(N) (sizes K or K+1, K = floor(N/G)); the gradient into K shards.
// Member j < K of every group owns shard j; the owners of shard j across the groups form
// column j. One all-reduce is then: a reduce-scatter in each group's ring (n-1 rounds,
// n = the group's size), a flat ring all-reduce of each shard over its column (2(G-1) rounds),
// an all-gather in each group's ring (n-1 rounds): 2(max n - 1) + 2(G - 1) = O(sqrt N) rounds.
//
// Speed order: direct before relayed (TURN), then higher bandwidth, then lower latency, then id
// (unmeasured figures sort after measured ones: an unknown link is not trusted to be fast).
// Groups are filled in speed order, so the fastest peers share rings and slow or relayed peers
// end up together in the last groups; each group's ring runs in speed order, so the slow members
// of a mixed group sit side by side at the ring's end (next to the wrap-around), never between
// two fast peers. The larger groups (K+1) are the last ones; their extra member (the slowest)
// owns no shard and takes no part in any column.

import { RingError } from './errors.ts';

/** What the coordinator knows about a peer's links (all optional: unmeasured is allowed). */
export interface PeerLinkInfo {
  id: string;
  /** Measured throughput of its links, bytes/s (any unit, as long as it is the same for all). */
  bandwidth?: number;
  /** True when its connections go through a TURN relay. */
  relayed?: boolean;
  /** Measured round-trip or one-way latency, ms (the same kind for all peers). */
  latencyMs?: number;
}

export interface Topology {
  /** Groups in speed order; each group's ids in its ring order (owners first). One group: flat. */
  readonly groups: readonly (readonly string[])[];
  /** K: shards of the gradient, members that own a shard in every group (the smallest group's size). */
  readonly shards: number;
  /** columns[j]: the ring of shard j's owners, groups[0][j], groups[1][j], ... (length G). */
  readonly columns: readonly (readonly string[])[];
}

export interface PlanOptions {
  /** Fewer peers than this: one flat group. Default 16. */
  minTwoLevel?: number;
  /** Force the number of groups (1..N); default round(sqrt N) from minTwoLevel peers up. */
  groups?: number;
}

export const MIN_TWO_LEVEL_PEERS = 16;

/** A peer's place in a topology: which rings it joins. */
export interface TwoLevelRole {
  group: number;
  /** Its group's ring order (form the group ring over these ids). */
  groupIds: readonly string[];
  groupRank: number;
  /** The shard it owns (its rank in the group), or null for a group's extra member. */
  shard: number | null;
  /** Its column's ring order, or null when it owns no shard or the column is just itself. */
  columnIds: readonly string[] | null;
}

/** Sorts peers fastest first (see the header); stable and total, so deterministic. */
export function speedOrder(peers: readonly PeerLinkInfo[]): PeerLinkInfo[] {
  const bw = (p: PeerLinkInfo) => p.bandwidth ?? -1;
  const lat = (p: PeerLinkInfo) => p.latencyMs ?? Number.POSITIVE_INFINITY;
  return [...peers].sort((a, b) =>
    Number(a.relayed ?? false) - Number(b.relayed ?? false)
    || bw(b) - bw(a)
    || lat(a) - lat(b)
    || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function validate(peers: readonly PeerLinkInfo[]): void {
  if (peers.length === 0) throw new RingError('bad-input', '', 'planTopology needs at least one peer');
  const seen = new Set<string>();
  for (const p of peers) {
    const bad = (why: string) => new RingError('bad-input', p.id, `planTopology: peer ${JSON.stringify(p.id)} ${why}`);
    if (typeof p.id !== 'string' || p.id === '') throw bad('has no id');
    if (seen.has(p.id)) throw bad('is listed twice');
    seen.add(p.id);
    if (p.bandwidth !== undefined && !(Number.isFinite(p.bandwidth) && p.bandwidth >= 0)) {
      throw bad(`has bandwidth ${p.bandwidth}: give a finite number >= 0 or leave it out`);
    }
    if (p.latencyMs !== undefined && !(Number.isFinite(p.latencyMs) && p.latencyMs >= 0)) {
      throw bad(`has latency ${p.latencyMs} ms: give a finite number >= 0 or leave it out`);
    }
  }
}

/** Groups, shard owners and columns for these peers; the same input always gives the same plan. */
export function planTopology(peers: readonly PeerLinkInfo[], o: PlanOptions = {}): Topology {
  validate(peers);
  const n = peers.length;
  const minTwoLevel = o.minTwoLevel ?? MIN_TWO_LEVEL_PEERS;
  const g = o.groups ?? (n < minTwoLevel ? 1 : Math.round(Math.sqrt(n)));
  if (!Number.isInteger(g) || g < 1 || g > n) throw new RingError('bad-input', '', `planTopology: ${g} groups for ${n} peers: give an integer in [1, ${n}]`);
  const ids = speedOrder(peers).map((p) => p.id);
  const k = Math.floor(n / g);
  const larger = n - g * k; // the last `larger` groups get K+1 members
  return topologyOfSizes(ids, Array.from({ length: g }, (_, i) => k + (i >= g - larger ? 1 : 0)));
}

/** The plan whose groups have `sizes`, cut from `ring` in order (pure; checkTopology checks). */
export function topologyOfSizes(ring: readonly string[], sizes: readonly number[]): Topology {
  const groups: string[][] = [];
  let at = 0;
  for (const s of sizes) {
    groups.push(ring.slice(at, at + s));
    at += s;
  }
  return topologyOfGroups(groups);
}

/**
 * The plan whose groups are `groups` (each in its ring order, owners first): shards = the
 * smallest group's size, column j = the j-th member of every group (pure; checkTopology checks).
 */
export function topologyOfGroups(groups: string[][]): Topology {
  const shards = Math.min(...groups.map((g) => g.length));
  return { groups, shards, columns: Array.from({ length: shards }, (_, j) => groups.map((g) => g[j]!)) };
}

/** The rings `id` takes part in; throws bad-input when the plan does not hold it. */
export function roleOf(t: Topology, id: string): TwoLevelRole {
  for (let group = 0; group < t.groups.length; group++) {
    const groupIds = t.groups[group];
    const groupRank = groupIds.indexOf(id);
    if (groupRank < 0) continue;
    const shard = groupRank < t.shards ? groupRank : null;
    const columnIds = shard !== null && t.groups.length > 1 ? t.columns[shard] : null;
    return { group, groupIds, groupRank, shard, columnIds };
  }
  throw new RingError('bad-input', id, `peer ${id} is not in the topology`);
}

/** Checks a plan received over the wire (every id once, sizes K or more, columns = owners). */
export function checkTopology(t: Topology): void {
  const bad = (why: string) => new RingError('bad-input', '', `malformed topology: ${why}`);
  if (t.groups.length === 0) throw bad('no groups');
  const k = Math.min(...t.groups.map((g) => g.length));
  if (t.shards !== k || k < 1) throw bad(`shards ${t.shards}, the smallest group has ${k} members`);
  const all = t.groups.flat();
  if (new Set(all).size !== all.length) throw bad('an id is in two places');
  if (t.columns.length !== k) throw bad(`${t.columns.length} columns for ${k} shards`);
  t.columns.forEach((col, j) => {
    if (col.length !== t.groups.length || col.some((id, g) => t.groups[g][j] !== id)) throw bad(`column ${j} is not [groups[g][${j}]]`);
  });
}

/**
 * Sequential message rounds (the latency terms) of one two-level all-reduce, at most: 2(max
 * group - 1) + 2(G - 1). With unequal groups the measured critical path can be one or two less
 * (the larger groups' extra hop is off it for most chunks): 13 for 17 peers, 14 here.
 */
export function twoLevelRounds(t: Topology): number {
  const maxGroup = Math.max(...t.groups.map((g) => g.length));
  return 2 * (maxGroup - 1) + 2 * (t.groups.length - 1);
}

/** Sequential message rounds of the flat ring all-reduce of n peers. */
export function flatRounds(n: number): number {
  return 2 * Math.max(0, n - 1);
}
