// Which samples a step uses: epoch e is a seeded permutation of the training split, and step
// s takes the s-th block of B ids of it (the last partial block of an epoch is dropped). The
// ids depend only on (seed, step, B, n), never on who computes them: a step re-run after a
// peer leaves uses the same samples, and N peers see the same batch as one peer would.
import { makeRng } from '../rng.ts';

export function stepsPerEpoch(n: number, globalBatch: number): number {
  return Math.max(1, Math.floor(n / globalBatch));
}

const perms = new Map<string, Uint32Array>();

/** The permutation of epoch `epoch` (cached: the last few epochs). */
export function epochPermutation(seed: number, epoch: number, n: number): Uint32Array {
  const key = `${seed}:${epoch}:${n}`;
  const hit = perms.get(key);
  if (hit) return hit;
  const p = new Uint32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  const rng = makeRng((seed * 2654435761 + epoch * 97 + 13) >>> 0);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = p[i]!;
    p[i] = p[j]!;
    p[j] = t;
  }
  if (perms.size >= 4) perms.delete(perms.keys().next().value!);
  perms.set(key, p);
  return p;
}

export interface StepSamples { epoch: number; ids: number[] }

export function stepSamples(seed: number, step: number, globalBatch: number, n: number): StepSamples {
  if (globalBatch > n) throw new RangeError(`global batch ${globalBatch} is larger than the ${n} training samples`);
  const spe = stepsPerEpoch(n, globalBatch);
  const epoch = Math.floor(step / spe);
  const start = (step % spe) * globalBatch;
  return { epoch, ids: Array.from(epochPermutation(seed, epoch, n).subarray(start, start + globalBatch)) };
}

/** Splits a step's ids into consecutive slices of the given sizes (which must sum to the batch). */
export function sliceIds(ids: readonly number[], sizes: readonly number[]): number[][] {
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total !== ids.length) throw new RangeError(`slice sizes sum to ${total}, the batch has ${ids.length}`);
  const out: number[][] = [];
  let o = 0;
  for (const s of sizes) {
    out.push(ids.slice(o, o + s));
    o += s;
  }
  return out;
}
