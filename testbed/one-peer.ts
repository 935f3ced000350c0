// Whether a ring trained as one peer would: the equivalence tests' check, robust to chaos.
//
// A ring's float rounding differs from one peer's (its gradient is summed in another order), and on a training
// trajectory a difference of 1e-7 near a tie (a max-pool window, a ReLU at zero) picks the other branch; the two
// runs then stay apart, by 1e-4..1e-2 after tens of steps, however right every step was. What must hold is that
// every step of the ring is one peer's step: resumed on one peer from the ring's own checkpoint (weights and
// optimiser state), one peer's steps land on the ring's next checkpoint to the rounding of one step. A lost or
// doubled gradient moves a step by far more (a twelfth of a 12-image step: 1e-2 of its change and up).
import { checkpointOf, checkpointSteps, finalWeights, relDiff, replayOnOnePeer } from './jobs.ts';
import type { Manifest } from '../src/data/manifest.ts';

/** How far one peer's step may land from the ring's, both from the same checkpoint: the rounding of one update. */
export const ONE_STEP_BOUND = 1e-5;

export interface OnePeerCheck {
  /** The final weights' distance, ring against one peer: max |dw| / max |w|. */
  final: number;
  /** Each replayed interval ("from -> to: distance"), when the final weights parted by `bound` or more. */
  replays: string[];
  /** What does not hold (empty when the ring is one peer's trajectory), with the replays and checkpoints around it. */
  failures: string[];
}

/**
 * The ring of `jobDir` against one peer's run of the same job (`refJobDir`), both finished at `steps`. Their final
 * weights closer than `bound`: done. Else every `every` steps of the ring are replayed on one peer from the ring's
 * checkpoint before them (three at a time: a replay is mostly a coordinator and a volunteer starting), and an
 * interval that lands ONE_STEP_BOUND or more from the ring's is replayed step by step, each step of which must land
 * within it. The ring's job must keep a checkpoint of every step (`checkpointEvery: 1`, enough kept): `config`.
 */
export async function checkOnePeer(
  root: string, name: string, data: { dataDir: string; manifest: Manifest }, config: Record<string, unknown>,
  jobDir: string, refJobDir: string, steps: number, bound: number, every = 4,
): Promise<OnePeerCheck> {
  const [multi, ref] = await Promise.all([finalWeights(jobDir), finalWeights(refJobDir)]);
  const failures: string[] = [];
  if (multi.step !== steps || ref.step !== steps) failures.push(`the runs ended at steps ${multi.step} and ${ref.step}, not ${steps}`);
  const final = relDiff(multi.weights, ref.weights);
  const replays: string[] = [];
  if (failures.length > 0 || final < bound) return { final, replays, failures };
  const kept = new Set(await checkpointSteps(jobDir));
  const missing = Array.from({ length: steps }, (_, i) => i + 1).filter((s) => !kept.has(s));
  if (missing.length > 0) return { final, replays, failures: [`the ring kept no checkpoint of steps ${missing.join(', ')}: replays need every step's`] };
  // The first interval from one peer's own start: the two runs began from the same seed.
  const first = relDiff((await checkpointOf(jobDir, every)).weights, (await checkpointOf(refJobDir, every)).weights);
  replays.push(`0 -> ${every}: ${first.toExponential(2)} (from the seed)`);
  if (first >= ONE_STEP_BOUND) failures.push(`step ${every} of the ring is ${first.toExponential(2)} from one peer's, both from the seed`);
  const starts = Array.from({ length: Math.ceil(steps / every) - 1 }, (_, i) => every * (i + 1));
  const fours = new Map<number, number>();
  for (let i = 0; i < starts.length; i += 3) {
    await Promise.all(starts.slice(i, i + 3).map(async (k) => {
      fours.set(k, await replayOnOnePeer(root, `${name}-${k}`, data, config, jobDir, k, Math.min(steps, k + every)));
    }));
  }
  for (const k of starts) {
    const to = Math.min(steps, k + every), r = fours.get(k)!;
    replays.push(`${k} -> ${to}: ${r.toExponential(2)}`);
    if (r < ONE_STEP_BOUND) continue;
    for (let j = k; j < to; j++) {
      const s = await replayOnOnePeer(root, `${name}-${j}-1`, data, config, jobDir, j, j + 1);
      replays.push(`${j} -> ${j + 1}: ${s.toExponential(2)}`);
      if (s >= ONE_STEP_BOUND) failures.push(`step ${j + 1} of the ring is ${s.toExponential(2)} from one peer's step from the ring's checkpoint of step ${j}`);
    }
  }
  if (failures.length > 0) failures.push(`replays: ${replays.join(', ')}`);
  return { final, replays, failures };
}
