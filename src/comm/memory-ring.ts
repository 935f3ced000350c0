// A whole ring of N peers in one process over in-memory links (tests, benchmarks baselines).

import { memoryLinkPair, type MemoryLink } from './memory-link.ts';
import { Ring, type RingSettings } from './ring.ts';

export interface MemoryRing {
  rings: Ring[];
  /** toNext[i]: peer i's link to peer i+1; fromPrev[i]: peer i's link from peer i-1. */
  toNext: MemoryLink[];
  fromPrev: MemoryLink[];
}

export function memoryRing(ids: readonly string[], o: { job?: number; generation?: number; settings?: Partial<RingSettings> } = {}): MemoryRing {
  const n = ids.length;
  const toNext: MemoryLink[] = [];
  const fromPrev: MemoryLink[] = new Array<MemoryLink>(n);
  for (let i = 0; i < n && n > 1; i++) {
    const [a, b] = memoryLinkPair(ids[i], ids[(i + 1) % n]);
    toNext.push(a);
    fromPrev[(i + 1) % n] = b;
  }
  const rings = ids.map((selfId, i) => new Ring({
    selfId, ids, job: o.job ?? 1, generation: o.generation ?? 1, next: toNext[i], prev: fromPrev[i], settings: o.settings,
  }));
  return { rings, toNext, fromPrev };
}
