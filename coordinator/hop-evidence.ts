// Who a disagreeing link points at (issue 46; docs/trust.md). When member x's record of what it
// sent to y differs from y's record of what it received (hop-check.ts), one of the two reports
// falsely, and one disagreement cannot say which. Every disagreement involves a dishonest member,
// so an honest member only ever disagrees with dishonest ones: with at most HOP_COLLUDERS of them
// in the job at once, an honest member disagrees with at most that many distinct members. A member
// that disagrees with more is dishonest, and named. So after a disagreement the step runs again
// in a ring where the members that disagreed are not neighbours the same way round (order): a
// member that keeps sending other than it reports meets a new successor each time, and is named
// at its (HOP_COLLUDERS + 1)-th; one that stops has cost a step and is watched by its evidence,
// kept for the job (only partners still in the ring count, and an evicted member is forgotten).
// Rings of n < HOP_COLLUDERS + 2 name a member that disagreed with every other (n - 1): there
// one colluder beside a liar could frame, as in the audits' smallest panel.

/** Dishonest members the naming assumes at most at once (the audits' disputes assume as many: DISPUTE_AUDITORS = 2 f + 1). */
export const HOP_COLLUDERS = 2;
/** Random ring orders tried for one that puts no disagreeing pair next to each other the same way round. */
const ORDER_TRIES = 256;

/** Distinct partners that name a member in a ring of `n` (null: a ring of 2 names nobody). */
export function namingPartners(n: number): number | null {
  return n < 3 ? null : Math.min(HOP_COLLUDERS + 1, n - 1);
}

export class HopEvidence {
  /** Disagreeing links seen, by sender: the receivers it disagreed with. */
  private readonly sent = new Map<string, Set<string>>();

  /** Records that `from`'s link to `to` disagreed. */
  add(from: string, to: string): void {
    if (from === to) return;
    const s = this.sent.get(from) ?? new Set<string>();
    s.add(to);
    this.sent.set(from, s);
  }

  /** The distinct members `id` disagreed with, either way round. */
  partners(id: string): Set<string> {
    const out = new Set(this.sent.get(id) ?? []);
    for (const [from, tos] of this.sent) if (tos.has(id)) out.add(from);
    return out;
  }

  /** Members of `ring` that disagreed with enough distinct others in it to be named (namingPartners): those gone count no more. */
  named(ring: readonly string[]): string[] {
    const k = namingPartners(ring.length);
    if (k === null) return [];
    const here = new Set(ring);
    return ring.filter((id) => [...this.partners(id)].filter((p) => here.has(p)).length >= k);
  }

  /** Forgets `ids` (evicted or gone): their partners' disagreements with them no longer count. */
  forget(ids: readonly string[]): void {
    for (const id of ids) this.sent.delete(id);
    for (const [from, tos] of this.sent) {
      for (const id of ids) tos.delete(id);
      if (tos.size === 0) this.sent.delete(from);
    }
  }

  /**
   * An order of `ring` (a rotation of which is the same ring) with as few of the recorded disagreeing links
   * as can be found in ORDER_TRIES random orders (`draw(n)`: a uniform integer in [0, n)) and then by moving
   * the members with a disagreement on record; the first with none ends the search.
   */
  order(ring: readonly string[], draw: (n: number) => number): string[] {
    const cost = (o: readonly string[]): number => o.reduce((c, id, i) => c + (this.sent.get(id)?.has(o[(i + 1) % o.length]!) ? 1 : 0), 0);
    let best = [...ring];
    let bestCost = cost(best);
    for (let t = 0; t < ORDER_TRIES && bestCost > 0; t++) {
      const o = [...ring];
      for (let k = o.length - 1; k > 0; k--) {
        const j = draw(k + 1);
        [o[k], o[j]] = [o[j]!, o[k]!];
      }
      const c = cost(o);
      if (c < bestCost) [best, bestCost] = [o, c];
    }
    // Then, whatever the draws gave, each member with a disagreement on record tried at every place (a swap), while that helps.
    const involved = ring.filter((id) => this.sent.has(id) || [...this.sent.values()].some((tos) => tos.has(id)));
    for (let pass = 0; pass < 4 && bestCost > 0; pass++) {
      let improved = false;
      for (const id of involved) {
        for (let j = 0; j < best.length && bestCost > 0; j++) {
          const i = best.indexOf(id);
          if (i === j) continue;
          const o = [...best];
          [o[i], o[j]] = [o[j]!, o[i]!];
          const c = cost(o);
          if (c < bestCost) {
            [best, bestCost] = [o, c];
            improved = true;
          }
        }
      }
      if (!improved) break;
    }
    return best;
  }
}
