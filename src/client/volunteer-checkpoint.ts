// The volunteer's checkpoints: loading the state of a step (the copy kept on this device when it
// is usable, else the coordinator's), keeping the newest one on the device for a fast rejoin
// (VolunteerPlatform.checkpoints), and uploading the weights of a step when asked.
import { CoordinatorError, downloadCheckpoint, uploadCheckpoint } from './http.ts';
import type { CheckpointKeeper, Ctx } from './volunteer-context.ts';

/** The job's key for the kept checkpoint (one per coordinator and job). */
export function jobKey(c: Ctx): string {
  return `${c.base}#${c.job.jobId}`;
}

/** Loads the checkpoint of `step` into the training state: the kept copy, or the coordinator's (then kept). */
export async function loadCheckpoint(c: Ctx, step: number): Promise<void> {
  const keeper = c.p.checkpoints;
  const kept = await keeper?.get(jobKey(c), step);
  let file = kept ?? (await downloadCheckpoint(c.fetchFn, c.base, step));
  try {
    c.state.load(file, step);
  } catch (e) {
    if (!kept) throw e;
    // The kept copy is unusable (another model, damaged): fetch it from the coordinator.
    file = await downloadCheckpoint(c.fetchFn, c.base, step);
    c.state.load(file, step);
  }
  if (!kept && keeper) await keepCheckpoint(c, keeper, step, file);
}

async function keepCheckpoint(c: Ctx, keeper: CheckpointKeeper, step: number, file: Uint8Array): Promise<void> {
  if (!(await keeper.keep(jobKey(c), step, file))) {
    c.log(`volunteer: no room on this device to keep the checkpoint of step ${step} (a rejoin will download it)`);
  }
}

/** Uploads the weights of `step`. A refusal is logged, not fatal: the coordinator decides what follows. */
export async function uploadState(c: Ctx, peer: { peerId: string; signalingToken: string }, step: number, generation: number): Promise<void> {
  const file = await c.state.toCheckpoint(step, generation, { job: c.job.job.name, peer: peer.peerId });
  try {
    await uploadCheckpoint(c.fetchFn, c.base, peer.peerId, peer.signalingToken, step, file);
    if (c.p.checkpoints) await keepCheckpoint(c, c.p.checkpoints, step, file);
  } catch (e) {
    if (!(e instanceof CoordinatorError)) throw e;
    c.log(`volunteer: ${e.message}`);
  }
}
