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
// members finish within about one chunk of each other.
//
// The all-reduce overlaps only the backward of a member's LAST micro-batch, so that one should
// be long enough to hide it, yet a member slowed in this step would also be slow on it; and every
// micro-batch costs a fixed overhead (a read-back, small kernels), so chunks should be few. So
// once every member has claimed after its fixed part (its rate in this step is known) and what
// is left of the tail would keep the ring busy for no more than the overlap window W (the larger
// of twice the last all-reduce and 3/4 of the last compute), each member's next claim gets its
// FINAL grant: a share of the rest in proportion to the rate it computed at in this step,
// flagged `last`. A member computes its pending chunk, then runs the final grant with the
// all-reduce overlapped; a slow member's final batch is smaller, so the members end their
// backward together. Chunks before that keep the members that finished their fixed part
// first busy while the slower ones finish theirs. The step commits the same ids as
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
  /** Ids per grant; absent: autoChunk (about STEAL_CHUNK_MS of compute). */
  chunk?: number;
}

/** Past this, the fixed parts are too small to keep a member busy until its first grant comes. */
export const MAX_STEAL_FRACTION = 0.75;
/**
 * The overlap window of the final grants: the larger of WINDOW_COMM_FACTOR times the last step's
 * all-reduce time (a backward of about two thirds of the compute then hides it) and
 * WINDOW_COMPUTE_SHARE of its compute (driver-steps.ts overlapWindow).
 */
export const WINDOW_COMM_FACTOR = 2;
export const WINDOW_COMPUTE_SHARE = 0.75;

/** A running step's tail: what is left of it, and what each member was granted (in order). */
export interface TailPool {
  chunk: number;
  /** Not granted yet, in the order they go out. */
  left: number[];
  granted: Map<string, number[]>;
  /** Members whose last claim came back empty or final: they have all of their slice. */
  drained: Set<string>;
  /** The overlap window W (ms): final grants begin when the tail left would last about this long (0: never, chunks to the end). */
  windowMs: number;
  /** Each member's fixed part (images), for its rate in this step. */
  fixedCount: Map<string, number>;
  /** When each member's first and second claims came (ms): its fixed part was computed in between (its first is sent before it computed anything). */
  firstClaimAt: Map<string, number>;
  secondClaimAt: Map<string, number>;
  /** A final grant went out: every member's next claim (with a rate) gets its final grant too. */
  finalPhase: boolean;
}

/** A grant's ids, and whether it is the member's last (its final micro-batch). */
export interface TailGrant { ids: number[]; last: boolean }

/**
 * A chunk's compute when the job names no chunk: long enough to hide a claim's round trip on a
 * LAN or a good home line behind it (one claim is in flight ahead), short enough that members
 * end within a few per cent of a step of each other.
 */
export const STEAL_CHUNK_MS = 40;
/** Fewer images than this in a micro-batch cost more in overhead than they compute (software WebGPU: ~20 ms a micro-batch, ~8 ms an image). */
export const MIN_CHUNK = 8;

/**
 * The chunk when the job names none: STEAL_CHUNK_MS of the median member's compute (its measured
 * images/s), at least MIN_CHUNK images, at most an eighth of a member's mean share of the tail
 * (before any speed is measured: that eighth; at least 1 id either way).
 */
export function autoChunk(tailIds: number, members: number, medianIps: number | null = null): number {
  const eighth = Math.max(1, Math.floor(tailIds / Math.max(1, 8 * members)));
  return medianIps !== null && medianIps > 0 ? Math.max(1, Math.min(eighth, Math.max(MIN_CHUNK, Math.round((medianIps * STEAL_CHUNK_MS) / 1000)))) : eighth;
}

/**
 * Splits each slice into its fixed part and its tail: the last floor(fraction * length) ids of
 * each slice go to the pool (in rank order). Null when nothing is kept back (every slice too
 * small, or a ring of one: nobody to steal from).
 */
export function splitTail(
  slices: readonly (readonly number[])[], s: StealSettings, ring: readonly string[] = slices.map((_, i) => String(i)),
  at: { windowMs: number; medianIps?: number | null } = { windowMs: 0 },
): { fixed: number[][]; pool: TailPool } | null {
  if (ring.length !== slices.length) throw new RangeError(`splitTail: ${slices.length} slices for a ring of ${ring.length}`);
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
  const fixedCount = new Map(ring.map((id, i) => [id, fixed[i]!.length]));
  return {
    fixed,
    pool: {
      chunk: s.chunk ?? autoChunk(left.length, slices.length, at.medianIps ?? null), left, granted: new Map(), drained: new Set(),
      windowMs: Math.max(0, at.windowMs), fixedCount, firstClaimAt: new Map(), secondClaimAt: new Map(), finalPhase: false,
    },
  };
}

/**
 * What a member holds granted but not computed when it claims: a member claims again as soon
 * as a chunk comes and computes a chunk only once the next one came (src/client/volunteer-train.ts
 * tail), so up to the last two chunks.
 */
const heldOf = (pool: TailPool, member: string): number => Math.min(pool.granted.get(member)?.length ?? 0, 2 * pool.chunk);

/**
 * Images/ms `member` computes at in this step: its fixed part over the time from its first claim
 * (sent as it starts computing, so the assignment's way to it and the ring's forming do not
 * count) to its second (sent as the fixed part is done). Every member's rate is measured on the
 * same kind of work (one micro-batch of its share), not on chunks, whose fixed cost per
 * micro-batch would make a member that took many look slower. Null before its second claim.
 */
function rateOf(pool: TailPool, member: string): number | null {
  const first = pool.firstClaimAt.get(member);
  const second = pool.secondClaimAt.get(member);
  const fixed = pool.fixedCount.get(member) ?? 0;
  if (first === undefined || second === undefined || second <= first || fixed === 0) return null;
  return fixed / (second - first);
}

/**
 * The answer to `member`'s claim at `now` (ms): the next chunk; or, once every member's rate is
 * known and the tail left would keep the ring busy for no more than the overlap window, its
 * final grant, sized so that the members still open end together (what is left and what each
 * holds, over their rates; the last member not final takes the rest). Empty once the tail is
 * gone. Either of the last two drains the member.
 */
export function grantNext(pool: TailPool, member: string, now = 0): TailGrant {
  if (!pool.firstClaimAt.has(member)) pool.firstClaimAt.set(member, now);
  else if (!pool.secondClaimAt.has(member)) pool.secondClaimAt.set(member, now);
  if (pool.drained.has(member)) return { ids: [], last: false };
  let take = pool.chunk;
  let last = false;
  const rate = rateOf(pool, member);
  if (rate !== null && pool.windowMs > 0 && pool.left.length > 0) {
    // Members still to be given their final grant, and the rate of each: once all are known.
    const open = [...pool.fixedCount.keys()].filter((id) => !pool.drained.has(id));
    const rates = open.map((id) => rateOf(pool, id));
    const total = rates.reduce((a: number, b) => a + (b ?? 0), 0);
    if (pool.finalPhase || (rates.every((r) => r !== null) && pool.left.length <= total * pool.windowMs)) {
      pool.finalPhase = true;
      last = true;
      // Each open member should end together: what is left and what they hold but have not
      // computed yet, over their rates, is the time D each has left.
      const held = (id: string) => heldOf(pool, id);
      const rated = total > 0 ? total : rate;
      const D = (pool.left.length + open.reduce((n, id) => n + held(id), 0)) / rated;
      take = open.length <= 1 ? pool.left.length : Math.min(pool.left.length, Math.max(1, Math.round(rate * D - held(member))));
    }
  }
  const ids = pool.left.splice(0, take);
  if (ids.length === 0 || last) pool.drained.add(member);
  if (ids.length === 0) return { ids: [], last: false };
  const had = pool.granted.get(member);
  if (had) had.push(...ids);
  else pool.granted.set(member, [...ids]);
  return { ids, last };
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
  if (!pool.drained.has(id)) return 'it reported the step before the tail was gone (its claims never came back empty or final)';
  const granted = pool.granted.get(id)?.length ?? 0;
  if (images !== fixedCount + granted || (claimed ?? 0) !== granted) {
    return `it reported ${images} images (${claimed ?? 0} claimed) where it holds ${fixedCount} + ${granted} granted`;
  }
  return null;
}
