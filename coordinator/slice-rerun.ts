// A lost peer costs its slice, not the step (sync mode, syncEvery 1). When an attempt of step s
// in generation g loses members (a crash, a leave, an eviction), every member of g has computed
// (or is computing) the gradient SUM of its slice and keeps a copy of it taken before the
// all-reduce touched the buffer (src/client/volunteer.ts). The re-run in the next generation
// gives each survivor its own slice again, first, followed by a share of the lost members'
// ids (split by measured speed, as slices are: splitBatch), and says so in the assignment's
// `reuse` (the generation and how many leading ids the kept sum covers). A survivor that holds
// exactly that sum adds it and computes only the extra ids; any other computes the whole slice.
// The union of the slices is the step's ids either way, so the step commits with exactly the
// samples the sampler drew for it, and N peers still equal 1 peer.
//
// A second loss during the re-run chains: the re-run's slices (kept + extra) are what its
// members then keep, keyed by the re-run's generation. Anyone in the ring who was not a member
// of the aborted attempt (which the driver avoids: joiners wait for the step boundary) makes
// the plan fall back to a fresh split with no reuse.
import type { SliceReuse } from '../src/protocol/messages.ts';
import { splitGroups } from './bn-groups.ts';

/** What the members of an aborted sync attempt hold: the slices whose sums they kept. */
export interface KeptSlices {
  step: number;
  epoch: number;
  /** The aborted attempt's generation (the key of the kept sums). */
  generation: number;
  /** Each member of the aborted attempt and its slice, in the attempt's ring order. */
  slices: ReadonlyMap<string, readonly number[]>;
  /** Ids of the step that no member held when it was aborted (a tail never granted: tail-pool.ts): re-run like a lost slice. */
  orphans: readonly number[];
}

/** The re-run over a ring of survivors: slices[rank] = kept ids then extra ids; reuse[rank] (null: nothing kept). */
export interface RerunPlan {
  slices: number[][];
  reuse: (SliceReuse | null)[];
  /** The lost members' ids, handed out in `slices`. */
  lost: number[];
  /** Extra ids per rank (the part each survivor computes when it holds its kept sum). */
  extra: number[];
}

/** The kept slices of an aborted attempt of `ring` (slices[rank] is ring[rank]'s). */
export function keptSlices(
  step: number, epoch: number, generation: number, ring: readonly string[], slices: readonly (readonly number[])[], orphans: readonly number[] = [],
): KeptSlices {
  if (slices.length !== ring.length) throw new RangeError(`keptSlices: ${slices.length} slices for a ring of ${ring.length}`);
  return { step, epoch, generation, slices: new Map(ring.map((id, i) => [id, [...slices[i]!]])), orphans: [...orphans] };
}

/**
 * Plans the re-run of `kept.step` over `ring` with measured throughputs `speeds[rank]`; null
 * when a member of `ring` was not in the aborted attempt (then the step is planned afresh).
 * With BN groups of `bnGroup` images (bn-groups.ts) the lost ids, runs of whole groups, are shared out in whole groups.
 */
export function planRerun(kept: KeptSlices, ring: readonly string[], speeds: readonly number[], bnGroup = 1): RerunPlan | null {
  if (speeds.length !== ring.length) throw new RangeError(`planRerun: ${speeds.length} speeds for a ring of ${ring.length}`);
  if (ring.length === 0 || ring.some((id) => !kept.slices.has(id))) return null;
  const members = new Set(ring);
  const lost: number[] = [...kept.orphans];
  for (const [id, ids] of kept.slices) if (!members.has(id)) lost.push(...ids);
  const extra = lost.length > 0 ? splitGroups(lost.length, bnGroup, speeds) : ring.map(() => 0);
  let at = 0;
  const slices = ring.map((id, rank) => {
    const own = kept.slices.get(id)!;
    const more = lost.slice(at, at + extra[rank]!);
    at += extra[rank]!;
    return [...own, ...more];
  });
  const reuse = ring.map((id) => {
    const count = kept.slices.get(id)!.length;
    return count > 0 ? { generation: kept.generation, count } : null;
  });
  return { slices, reuse, lost, extra };
}

/** A short digest of a step's sample ids whatever their order or split: "<count>:<fnv-1a of the sorted ids>". */
export function sampleDigest(slices: readonly (readonly number[])[]): string {
  // Ids are u32 (decode.ts sampleId): a typed sort, several times faster than a comparator's at ImageNet batches.
  // Copied by index into one array (flat() and Uint32Array.from's iterator took ~6 ms a commit at 16K ids in 1,000 slices).
  let n = 0;
  for (const s of slices) n += s.length;
  const ids = new Uint32Array(n);
  let at = 0;
  for (const s of slices) for (let i = 0; i < s.length; i++) ids[at++] = s[i]!;
  ids.sort();
  let h = 0x811c9dc5;
  for (let i = 0; i < n; i++) {
    const id = ids[i]!;
    h = Math.imul(h ^ (id & 0xff), 0x01000193);
    h = Math.imul(h ^ ((id >>> 8) & 0xff), 0x01000193);
    h = Math.imul(h ^ ((id >>> 16) & 0xff), 0x01000193);
    h = Math.imul(h ^ (id >>> 24), 0x01000193);
  }
  return `${n}:${(h >>> 0).toString(16).padStart(8, '0')}`;
}
