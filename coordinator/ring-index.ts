// A ring's members by id, indexed once per ring array: "is X a member" and "X's rank" in O(1)
// where they run per message, per member of a step or per tick (a ring of 2,000 made each an
// O(N^2) sweep a step). Rings are never changed in place (a change makes a new array), so an
// index kept by array identity stays true. Pure apart from that cache.
const index = new WeakMap<readonly string[], Map<string, number>>();

/** The rank of `id` in `ring`, or -1. */
export function rankOf(ring: readonly string[], id: string): number {
  let m = index.get(ring);
  if (!m) {
    m = new Map();
    ring.forEach((p, i) => { if (!m!.has(p)) m!.set(p, i); });
    index.set(ring, m);
  }
  return m.get(id) ?? -1;
}

/** Whether `id` is a member of `ring`. */
export const inRing = (ring: readonly string[], id: string): boolean => rankOf(ring, id) >= 0;
