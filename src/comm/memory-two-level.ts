// A whole two-level topology in one process over in-memory links (tests, benchmark baselines).

import { TwoLevelRings } from './hierarchical.ts';
import type { Link } from './link.ts';
import { memoryLinkPair, type MemoryLink } from './memory-link.ts';
import { Ring, type RingSettings } from './ring.ts';
import { roleOf, type Topology } from './topology.ts';

/** A peer's memory links: to next and from prev in its group ring and its column ring. */
export interface PeerMemoryLinks {
  groupNext?: MemoryLink;
  groupPrev?: MemoryLink;
  columnNext?: MemoryLink;
  columnPrev?: MemoryLink;
}

export interface MemoryTwoLevel {
  /** Every peer's rings, by id. */
  peers: Map<string, TwoLevelRings>;
  links: Map<string, PeerMemoryLinks>;
}

export interface MemoryTwoLevelOptions {
  job?: number;
  generation?: number;
  settings?: Partial<RingSettings>;
  /** Wraps each link end before its ring takes it (tests count or delay messages). */
  wrap?: (link: MemoryLink, selfId: string) => Link;
}

/** Links of one ring over `ids`: next.get(id) sends to the id after it, prev.get(id) receives from the one before. */
function ringLinks(ids: readonly string[]): { next: Map<string, MemoryLink>; prev: Map<string, MemoryLink> } {
  const next = new Map<string, MemoryLink>();
  const prev = new Map<string, MemoryLink>();
  for (let i = 0; i < ids.length && ids.length > 1; i++) {
    const to = ids[(i + 1) % ids.length];
    const [a, b] = memoryLinkPair(ids[i], to);
    next.set(ids[i], a);
    prev.set(to, b);
  }
  return { next, prev };
}

export function memoryTwoLevel(t: Topology, o: MemoryTwoLevelOptions = {}): MemoryTwoLevel {
  const job = o.job ?? 1;
  const generation = o.generation ?? 1;
  const wrap = o.wrap ?? ((l: MemoryLink) => l);
  const group = t.groups.map(ringLinks);
  const column = t.groups.length > 1 ? t.columns.map(ringLinks) : [];
  const peers = new Map<string, TwoLevelRings>();
  const links = new Map<string, PeerMemoryLinks>();
  for (const id of t.groups.flat()) {
    const role = roleOf(t, id);
    const g = group[role.group];
    const c = role.columnIds && role.shard !== null ? column[role.shard] : null;
    const mine: PeerMemoryLinks = { groupNext: g.next.get(id), groupPrev: g.prev.get(id), columnNext: c?.next.get(id), columnPrev: c?.prev.get(id) };
    const w = (l: MemoryLink | undefined) => (l ? wrap(l, id) : undefined);
    const groupRing = new Ring({ selfId: id, ids: role.groupIds, job, generation, next: w(mine.groupNext), prev: w(mine.groupPrev), settings: o.settings });
    const columnRing = role.columnIds
      ? new Ring({ selfId: id, ids: role.columnIds, job, generation, next: w(mine.columnNext), prev: w(mine.columnPrev), settings: o.settings })
      : null;
    peers.set(id, new TwoLevelRings({ topology: t, group: groupRing, column: columnRing }));
    links.set(id, mine);
  }
  return { peers, links };
}
