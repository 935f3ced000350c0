// The rate search's grid rule: when the best rate of a grid sits on its edge, the optimum may
// lie past it, so the next rate to try is past that edge (half the lowest, twice the highest).
// A rate that diverged scores as its validation accuracy (chance) and is never the best.

export interface Tried { lr: number; val: number; diverged: boolean }

/** The next rate to try, or null when the best rate has tried rates on both sides. */
export function pastEdge(tries: readonly Tried[]): number | null {
  if (tries.length === 0) throw new Error('pastEdge: no rates tried yet');
  const sorted = [...tries].sort((a, b) => a.lr - b.lr);
  const best = tries.reduce((a, b) => (b.val > a.val ? b : a));
  if (best.diverged) return sorted[0]!.lr / 2;
  if (best.lr === sorted[0]!.lr) return best.lr / 2;
  if (best.lr === sorted[sorted.length - 1]!.lr) return best.lr * 2;
  return null;
}
