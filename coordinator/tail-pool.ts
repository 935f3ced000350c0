// Work stealing at the end of a sync step (job `stealFraction`): a step waits for its slowest
// member, and a member slowed by chance (its OS, a browser tab, a shared GPU) holds up the whole
// ring, all the more the larger the ring. So the coordinator keeps back the last `fraction` of
// every member's slice as the step's TAIL and hands it out in chunks to whoever asks first:
//
//   member:  computes its fixed part, one `claim` in flight ahead; each `grant` it gets is
//            added to its gradient sum and answered by the next claim; an empty grant (the
//            tail is gone) lets it run its last micro-batch with the all-reduce overlapped.
//   coordinator: grants the next chunk of the tail to each claim, and records who holds what.
//
// A fast member thus ends up with more of the step, a slow one with less, and the ring's
// members finish within about one chunk of each other. The step commits the same ids as
// without stealing (the union of fixed parts and grants is the sampler's draw), so N peers still
// equal 1 peer. Each member's slice is its fixed part then its grants in the order granted:
// that is what it reports (`images`, `claimed`), what it keeps for a re-run if the step is
// aborted, and what the re-run after a loss reuses (slice-rerun.ts); ids of the tail that were
// never granted are re-run like a lost member's.
//
// Pure functions and one plain record per running step; the driver owns the messages.

/** The job's stealing settings (absent: no stealing). */
export interface StealSettings {
  /** The share of each member's slice kept back as the tail, in (0, MAX_STEAL_FRACTION]. */
  fraction: number;
  /** Ids per grant; absent: about a quarter of the tail's mean share per member (autoChunk). */
  chunk?: number;
}

/** Past this, the fixed parts are too small to keep a member busy until its first grant comes. */
export const MAX_STEAL_FRACTION = 0.5;

/** A running step's tail: what is left of it, and what each member was granted (in order). */
export interface TailPool {
  chunk: number;
  /** Not granted yet, in the order they go out. */
  left: number[];
  granted: Map<string, number[]>;
  /** Members whose last claim came back empty: they have all of their slice. */
  drained: Set<string>;
}

/** The chunk when the job names none: about four grants per member on average (at least 1 id). */
export function autoChunk(tailIds: number, members: number): number {
  return Math.max(1, Math.floor(tailIds / Math.max(1, 4 * members)));
}

/**
 * Splits each slice into its fixed part and its tail: the last floor(fraction * length) ids of
 * each slice go to the pool (in rank order). Null when nothing is kept back (every slice too
 * small, or a ring of one: nobody to steal from).
 */
export function splitTail(slices: readonly (readonly number[])[], s: StealSettings): { fixed: number[][]; pool: TailPool } | null {
  if (!(s.fraction > 0 && s.fraction <= MAX_STEAL_FRACTION)) throw new RangeError(`splitTail: fraction ${s.fraction} is not in (0, ${MAX_STEAL_FRACTION}]`);
  if (s.chunk !== undefined && !(Number.isInteger(s.chunk) && s.chunk >= 1)) throw new RangeError(`splitTail: chunk ${s.chunk} is not a positive integer`);
  if (slices.length < 2) return null;
  const fixed: number[][] = [];
  const left: number[] = [];
  for (const ids of slices) {
    const t = Math.floor(s.fraction * ids.length);
    fixed.push(ids.slice(0, ids.length - t));
    left.push(...ids.slice(ids.length - t));
  }
  if (left.length === 0) return null;
  return { fixed, pool: { chunk: s.chunk ?? autoChunk(left.length, slices.length), left, granted: new Map(), drained: new Set() } };
}

/** The next chunk of the tail for `member` (recorded as granted); empty once the tail is gone (the member is then drained). */
export function grantNext(pool: TailPool, member: string): number[] {
  const ids = pool.left.splice(0, pool.chunk);
  if (ids.length === 0) {
    pool.drained.add(member);
    return [];
  }
  const had = pool.granted.get(member);
  if (had) had.push(...ids);
  else pool.granted.set(member, [...ids]);
  return ids;
}

/** Each member's whole slice (ring order): its fixed part, then what it was granted. */
export function slicesWithGrants(ring: readonly string[], fixed: readonly (readonly number[])[], pool: TailPool): number[][] {
  if (fixed.length !== ring.length) throw new RangeError(`slicesWithGrants: ${fixed.length} fixed parts for a ring of ${ring.length}`);
  return ring.map((id, rank) => [...fixed[rank]!, ...(pool.granted.get(id) ?? [])]);
}

/**
 * Why member `id`'s result cannot be part of the step (null: it can): it reported before its
 * claims came back empty, or its image count is not its fixed part plus its grants.
 */
export function tailResultProblem(pool: TailPool, id: string, fixedCount: number, images: number, claimed: number | undefined): string | null {
  if (!pool.drained.has(id)) return 'it reported the step before the tail was gone (its claims never came back empty)';
  const granted = pool.granted.get(id)?.length ?? 0;
  if (images !== fixedCount + granted || (claimed ?? 0) !== granted) return `it reported ${images} images (${claimed ?? 0} claimed) where it holds ${fixedCount} + ${granted} granted`;
  return null;
}
