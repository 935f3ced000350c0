// Shard affinity: which member of the ring computes which of a step's ids when ids are drawn
// shard-locally (src/train/sampler.ts). A pure function of (state, step's ids, ring, targets):
// the state remembers which shards each peer holds (those it was given ids of, at most
// `capacity` per peer, least recently used dropped first), and the result says each rank's ids.
//
//   1. a shard one member holds goes to it; a shard several hold fills their deficits
//      (target - given so far), the neediest first, so each can hand the others some later;
//   2. the other shards, largest first, each to the member with the largest deficit: a joiner
//      takes over a leaver's shards, a new block's shards spread by speed;
//   3. balance to the exact targets: ids move from a member over its target to one under it
//      along a chain of shards each receiver holds (no download), shortest chain first; only
//      when none exists does a receiver take ids of a shard new to it (one download).
// A member's ids then follow the speed split exactly; in steady state only a few shards of a
// block are shared between two members, and a shard is fetched by about one member.
export interface AffinityState {
  /** Per peer: the shards it holds, least recently used first. */
  readonly held: ReadonlyMap<string, readonly number[]>;
}

export const emptyAffinity = (): AffinityState => ({ held: new Map() });

export interface AffinityInput {
  /** The step's ids, in the sampler's order. */
  ids: readonly number[];
  shardOf(id: number): number;
  /** Peer ids in rank order. */
  ring: readonly string[];
  /** Images per rank (splitBatch by measured speed): integers >= 0 summing to ids.length. */
  targets: readonly number[];
  /** Shards a peer keeps at most. */
  capacity: number;
}

export interface AffinityResult {
  /** Each rank's ids, in the sampler's order; slices[r].length === targets[r]. */
  slices: number[][];
  state: AffinityState;
  /** (peer, shard) pairs given ids of a shard the peer did not hold: shard downloads. */
  fetches: number;
}

/** A peer keeps its share of two blocks (this one and the next, prefetched) and two shared shards. */
export function affinityCapacity(window: number, ringSize: number): number {
  return Math.ceil((2 * window) / Math.max(1, ringSize)) + 2;
}

export function assignByAffinity(state: AffinityState, a: AffinityInput): AffinityResult {
  const P = a.ring.length;
  checkInput(a);
  // The step's ids by shard (positions in ids), shards in order of first appearance.
  const groups = new Map<number, number[]>();
  a.ids.forEach((id, pos) => {
    const k = a.shardOf(id);
    const g = groups.get(k);
    if (g) g.push(pos);
    else groups.set(k, [pos]);
  });
  const first = new Map([...groups].map(([k, g]) => [k, g[0]!]));
  const held = a.ring.map((id) => new Set(state.held.get(id) ?? []));
  const got = a.ring.map(() => new Map<number, number[]>());
  const load = new Array<number>(P).fill(0);
  const deficit = (r: number) => a.targets[r]! - load[r]!;
  const neediest = (eligible: (r: number) => boolean): number => {
    let best = -1;
    for (let r = 0; r < P; r++) if (eligible(r) && (best < 0 || deficit(r) > deficit(best))) best = r;
    return best;
  };
  const give = (r: number, k: number, pos: number[]) => {
    const mine = got[r]!.get(k);
    if (mine) mine.push(...pos);
    else got[r]!.set(k, [...pos]);
    load[r] = load[r]! + pos.length;
  };

  const unheld: number[] = [];
  const shared: number[] = [];
  for (const [k, pos] of groups) {
    const holders = held.filter((h) => h.has(k)).length;
    if (holders === 0) unheld.push(k);
    else if (holders > 1) shared.push(k);
    else give(held.findIndex((h) => h.has(k)), k, pos);
  }
  // A shard two members hold fills their deficits, so either can hand the other some later.
  for (const k of shared) {
    const pos = groups.get(k)!;
    for (let o = 0; o < pos.length;) {
      const r = neediest((q) => held[q]!.has(k));
      const take = deficit(r) > 0 ? Math.min(deficit(r), pos.length - o) : pos.length - o;
      give(r, k, pos.slice(o, o + take));
      o += take;
    }
  }
  unheld.sort((x, y) => groups.get(y)!.length - groups.get(x)!.length || first.get(x)! - first.get(y)!);
  for (const k of unheld) give(neediest(() => true), k, groups.get(k)!);

  const move = (from: number, to: number, k: number, count: number) => {
    const pos = got[from]!.get(k)!;
    const taken = pos.splice(pos.length - count, count);
    if (pos.length === 0) got[from]!.delete(k);
    load[from] = load[from]! - count;
    give(to, k, taken);
  };
  for (;;) {
    const d = neediest(() => true);
    if (d < 0 || deficit(d) <= 0) break;
    const path = heldPath(d, a.targets, load, got, held);
    if (path) {
      const count = Math.min(deficit(d), -deficit(path[0]!.from), ...path.map((h) => got[h.from]!.get(h.shard)!.length));
      for (const h of path) move(h.from, h.to, h.shard, count);
    } else {
      const m = fetchMove(d, a.targets, load, got, held, first);
      move(m.donor, d, m.shard, m.count);
    }
  }

  let fetches = 0;
  const next = new Map<string, number[]>();
  a.ring.forEach((id, r) => {
    const mine = [...got[r]!.keys()].sort((x, y) => first.get(x)! - first.get(y)!);
    fetches += mine.filter((k) => !held[r]!.has(k)).length;
    const kept = (state.held.get(id) ?? []).filter((k) => !got[r]!.has(k));
    next.set(id, [...kept, ...mine].slice(-a.capacity));
  });
  const slices = got.map((g) => [...g.values()].flat().sort((x, y) => x - y).map((pos) => a.ids[pos]!));
  slices.forEach((s, r) => {
    if (s.length !== a.targets[r]) throw new Error(`assignByAffinity: rank ${r} got ${s.length} ids for a target of ${a.targets[r]} (a bug)`);
  });
  return { slices, state: { held: next }, fetches };
}

interface Hop { from: number; to: number; shard: number }

/**
 * A chain of members from one over its target to `d`, each hop moving ids of a shard the
 * receiver holds (or was given this step): balancing along it costs no download. Shortest
 * first (breadth-first from `d`), lower ranks first; per hop the shard with the most ids.
 */
function heldPath(
  d: number, targets: readonly number[], load: readonly number[], got: readonly Map<number, number[]>[], held: readonly ReadonlySet<number>[],
): Hop[] | null {
  const via = new Map<number, Hop | null>([[d, null]]);
  const holds = (r: number, k: number) => held[r]!.has(k) || got[r]!.has(k);
  for (let frontier = [d]; frontier.length > 0;) {
    const next: number[] = [];
    for (const y of frontier) {
      for (let x = 0; x < got.length; x++) {
        if (via.has(x)) continue;
        let shard = -1;
        for (const [k, pos] of got[x]!) if (holds(y, k) && (shard < 0 || pos.length > got[x]!.get(shard)!.length)) shard = k;
        if (shard < 0) continue;
        via.set(x, { from: x, to: y, shard });
        if (load[x]! > targets[x]!) {
          const path: Hop[] = [];
          for (let h = via.get(x) ?? null; h; h = via.get(h.to) ?? null) path.push(h);
          return path;
        }
        next.push(x);
      }
    }
    frontier = next;
  }
  return null;
}

interface Move { donor: number; shard: number; count: number }

/**
 * When no chain of held shards reaches `d`: ids of a shard new to `d` (one download), from a
 * member over its target, one shard that covers the need in one piece (the smallest such),
 * else the largest; ties to the lower donor rank, then the earlier shard.
 */
function fetchMove(
  d: number, targets: readonly number[], load: readonly number[], got: readonly Map<number, number[]>[], held: readonly ReadonlySet<number>[],
  first: ReadonlyMap<number, number>,
): Move {
  let best: { move: Move; score: number[] } | null = null;
  const need = targets[d]! - load[d]!;
  for (let u = 0; u < got.length; u++) {
    const surplus = load[u]! - targets[u]!;
    if (surplus <= 0) continue;
    const want = Math.min(need, surplus);
    for (const [k, pos] of got[u]!) {
      const covers = pos.length >= want;
      const holders = held.filter((h) => h.has(k)).length;
      const score = [holders, covers ? 0 : 1, covers ? pos.length : -pos.length, u, first.get(k)!];
      if (!best || lexLess(score, best.score)) best = { move: { donor: u, shard: k, count: Math.min(want, pos.length) }, score };
    }
  }
  if (!best) throw new Error(`assignByAffinity: rank ${d} is under its target but nobody is over theirs (a bug)`);
  return best.move;
}

function lexLess(x: readonly number[], y: readonly number[]): boolean {
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! < y[i]!;
  return false;
}

function checkInput(a: AffinityInput): void {
  if (a.ring.length === 0) throw new RangeError('assignByAffinity: the ring is empty');
  if (a.targets.length !== a.ring.length) throw new RangeError(`assignByAffinity: ${a.targets.length} targets for a ring of ${a.ring.length}`);
  const bad = a.targets.findIndex((t) => !(Number.isInteger(t) && t >= 0));
  if (bad >= 0) throw new RangeError(`assignByAffinity: the target of rank ${bad} must be an integer >= 0, got ${a.targets[bad]}`);
  const total = a.targets.reduce((x, y) => x + y, 0);
  if (total !== a.ids.length) throw new RangeError(`assignByAffinity: targets sum to ${total}, the step has ${a.ids.length} ids`);
  if (!(Number.isInteger(a.capacity) && a.capacity >= 1)) throw new RangeError(`assignByAffinity: capacity must be an integer >= 1 shards, got ${a.capacity}`);
}
