// Undoing a convicted peer's unaudited work (issue 46 part 3; docs/trust.md). Audits draw a few
// slices a step, so a cheater caught in step s may have sent wrong gradients in earlier steps
// nobody recomputed; every step it contributed to without an audit of its slice is suspect. The
// driver keeps, per member, the step count before the first such step (`unauditedFrom`: the
// weights after that many steps hold none of its unaudited work), and on a conviction the ring
// goes back to the newest kept checkpoint at or before it (the seed, step 0, when none is kept)
// and trains the steps after it again without the cheater. Steps it contributed to under an
// audit that agreed stay: those slices were recomputed by someone else and matched.

/** Where the job goes back to when peers whose first unaudited contributions are `from` are convicted (pure). */
export function undoPoint(
  from: readonly (number | undefined)[], committed: number, kept: readonly number[],
): { first: number; to: number; undone: number } | null {
  const known = from.filter((s): s is number => s !== undefined);
  if (known.length === 0) return null;
  const first = Math.min(...known);
  if (first >= committed) return null; // nothing of theirs unaudited was committed
  const to = Math.max(0, ...kept.filter((s) => s <= first));
  return { first, to, undone: committed - to };
}

/**
 * The members whose slice of a committed step was not recomputed by an audit that agreed
 * (`audited`): their `unauditedFrom` becomes `step` (the step's index: weights after `step`
 * steps) unless it is set already. Returns the members it set (pure but for `set`).
 */
export function noteUnaudited(members: readonly { id: string; images: number }[], audited: ReadonlySet<string>, step: number,
  get: (id: string) => number | undefined, set: (id: string, step: number) => void): string[] {
  const fresh = members.filter((m) => m.images > 0 && !audited.has(m.id) && get(m.id) === undefined);
  for (const m of fresh) set(m.id, step);
  return fresh.map((m) => m.id);
}

/** A survivor's mark after the ring went back to `to`: its unaudited work after `to` is undone with everyone's. */
export const afterUndo = (unauditedFrom: number | undefined, to: number): number | undefined =>
  unauditedFrom !== undefined && unauditedFrom < to ? unauditedFrom : undefined;

/** The log line of an undo. */
export function undoLine(names: readonly string[], u: { first: number; to: number }, committed: number): string {
  const where = u.to === 0 ? 'the seed (no checkpoint kept from before that step)' : `the checkpoint of step ${u.to}`;
  return `verification: ${names.join(', ')} contributed unaudited work from step ${u.first + 1} on; `
    + `the ring goes back to ${where} and trains steps ${u.to + 1}..${committed} again without them`;
}
