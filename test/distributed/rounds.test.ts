// Low-communication rounds end to end on loopback: a real coordinator and volunteers as Node
// processes (wasm, and a mixed ring with a Dawn WebGPU peer).
//   sync untouched: a job that writes syncEvery 1 out is today's sync mode to the bit, and one
//     peer in rounds with outer rate 1 and no outer momentum follows the sync trajectory;
//   warm-up: sync steps first, then rounds, in one job;
//   rounds with ResNet-20, ghost batch norm, micro-batches and LARS (the ImageNet recipe's parts,
//     which syncEvery auto may switch to): each step and round once with one checksum;
//   mixed ring: a WebGPU peer and two wasm peers in rounds agree to the bit after every round,
//     with each peer's own inner momentum and with the momentum carried from the round's sum;
//   churn (momentum carried, as npm start's rounds): a peer killed mid-round is left out of the
//     round (the survivors reuse their inner steps instead of redoing them), a joiner enters at
//     the next round boundary from a checkpoint, every round commits once and every peer agrees
//     after each.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnVolunteer, type LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { join } from 'node:path';
import { openCheckpointStore } from '../../coordinator/checkpoints.ts';
import { decodeCheckpoint } from '../../src/checkpoint/format.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import {
  abortsText, finalWeights, frozenVolunteer, lossAborts, metricsOf, onePeerWeights, relDiff, startTestJob, stopAll, tempRoot, buildTestData,
  testJob, until, untilFrozen, volunteer,
} from '../../testbed/jobs.ts';

let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];

beforeAll(async () => {
  root = await tempRoot('rounds');
  data = await buildTestData(root.dir);
});

afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

/** The committed rounds: each exactly once, in order, with one checksum shared by all its peers. */
async function checkRounds(jobDir: string, ends: number[]): Promise<{ ring: number; innerSteps: number; bytesPerImage: number }[]> {
  const records = await metricsOf(jobDir);
  const steps = records.filter((r) => r.type === 'step');
  expect(steps.map((r) => r.step)).toEqual(ends);
  return steps.map((r) => {
    const sums = new Set(r.peers.map((p) => p.checksum));
    expect(sums.size, `round ending at step ${r.step}: checksums ${[...sums].join(', ')}`).toBe(1);
    return { ring: r.ring, innerSteps: r.traffic?.innerSteps ?? 0, bytesPerImage: r.traffic?.bytesPerImage ?? -1 };
  });
}

describe('rounds (syncEvery > 1)', () => {
  it('syncEvery 1 written out is sync mode to the bit; one peer in rounds (outer rate 1, no momentum) follows the sync trajectory', async () => {
    const K = 8;
    // Rounds add their inner steps' change to the weights, which rounds differently from sync steps (testJob's GENTLE_LARS).
    const sync = await onePeerWeights(root.dir, 'sync', data, testJob(K), 'wasm');
    const one = await onePeerWeights(root.dir, 'sync1', data, testJob(K, { syncEvery: 1 }), 'wasm');
    expect(Buffer.from(one.weights.buffer, one.weights.byteOffset, one.weights.byteLength).equals(
      Buffer.from(sync.weights.buffer, sync.weights.byteOffset, sync.weights.byteLength),
    )).toBe(true);
    const rounds = await onePeerWeights(root.dir, 'plain', data, testJob(K, { syncEvery: 4, outerLr: 1, outerMomentum: 0 }), 'wasm');
    expect(rounds.step).toBe(K);
    const diff = relDiff(rounds.weights, sync.weights);
    console.log(`one peer, rounds of 4 with a plain outer step vs sync after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-5);
    expect(await checkRounds(join(root.dir, 'plain'), [4, 8])).toEqual([
      { ring: 1, innerSteps: 4, bytesPerImage: 0 }, { ring: 1, innerSteps: 4, bytesPerImage: 0 },
    ]);
  });

  it.each([['own', {}], ['carried', { momentumCarry: 0.75, outerLr: 1, outerMomentum: 0 }]] as const)('a WebGPU peer and two wasm peers in rounds ' +
    'hold the same weights after every round (inner momentum %s)', async (name, extra) => {
    const job = await startTestJob(root.dir, `mixed-${name}`, data, testJob(12, { minPeers: 3, syncEvery: 4, ...extra }));
    const vs = [volunteer(job.url, 'gpu', 'webgpu'), volunteer(job.url, 'cpu1', 'wasm'), volunteer(job.url, 'cpu2', 'wasm')];
    spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const rounds = await checkRounds(job.jobDir, [4, 8, 12]);
    expect(rounds.every((r) => r.ring === 3 && r.innerSteps === 4)).toBe(true);
    // A round sends the model about 2 (N-1)/N times per peer, over 4 steps' images.
    const floats = (await finalWeights(job.jobDir)).weights.length;
    const payload = (3 * 2 * (2 / 3) * floats * 4) / (4 * 24);
    for (const r of rounds) expect(r.bytesPerImage / payload - 1).toBeGreaterThanOrEqual(0); // frame headers on top
    for (const r of rounds) expect(r.bytesPerImage / payload - 1).toBeLessThan(0.01);
    const seed = await onePeerWeights(root.dir, `zero-${name}`, data, testJob(1, { optimizer: { kind: 'sgd', lr: 1e-9 } }), 'wasm');
    expect(relDiff((await finalWeights(job.jobDir)).weights, seed.weights)).toBeGreaterThan(1e-3); // it trained
    // The last round's inner momentum (in the checkpoint of step 12): carried, it is
    // rho (1 - m) / (m (1 - m^4)) times the round's mean change, which the plain outer step
    // (rate 1, no momentum) made the weights' change from step 8 to 12; each peer's own is not.
    const store = await openCheckpointStore(join(job.jobDir, 'checkpoints'), { keep: 100 });
    const read = async (step: number) => decodeCheckpoint((await store.readStepFile(step))!.bytes, `step ${step}`);
    const [c8, c12] = [await read(8), await read(12)];
    const k = (0.75 * (1 - 0.9)) / (0.9 * (1 - 0.9 ** 4));
    const carried = Float32Array.from(c8.weights, (w0, i) => k * (w0 - c12.weights[i]!));
    const v = c12.optimizer.momentum!;
    if (name === 'carried') expect(relDiff(v, carried)).toBeLessThan(1e-3);
    else expect(relDiff(v, carried)).toBeGreaterThan(0.05);
  });

  it('a sync warm-up, then rounds: every step and round once, one checksum each', async () => {
    const job = await startTestJob(root.dir, 'warm', data, testJob(8, { minPeers: 2, syncEvery: 4, syncWarmup: 4 }));
    const vs = ['a', 'b'].map((n) => volunteer(job.url, n, 'wasm'));
    spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const rounds = await checkRounds(job.jobDir, [1, 2, 3, 4, 8]);
    expect(rounds.map((r) => r.innerSteps)).toEqual([1, 1, 1, 1, 4]);
  });

  it('rounds with the ImageNet recipe\'s parts (ResNet-20, ghost batch norm, micro-batches, LARS, the carry): ' +
    'every step and round once, one checksum each', async () => {
    // What syncEvery auto switches an ImageNet job to when its all-reduce dominates: sync steps, then rounds.
    const config = testJob(8, { model: 'resnet20', minPeers: 2, bnGroup: 4, syncEvery: 4, syncWarmup: 2, momentumCarry: 0.75, outerLr: 1, outerMomentum: 0 });
    const job = await startTestJob(root.dir, 'rounds-resnet', data, config);
    const vs = ['a', 'b'].map((name) => spawnVolunteer({
      url: job.url, name, args: ['--no-tune', '--rejoin-for', '60', '--backend', 'wasm', '--micro-batch', '4'],
    }));
    spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    for (const v of vs) expect(v.lines.some((l) => /micro-batch 2 of/.test(l)), v.lines.slice(-20).join('\n')).toBe(true);
    const rounds = await checkRounds(job.jobDir, [1, 2, 6, 8]);
    expect(rounds.map((r) => r.innerSteps)).toEqual([1, 1, 4, 2]);
  });

  it('a peer killed mid-round: the survivors reuse their inner steps, the round commits without it, a joiner enters at the next round', async () => {
    const job = await startTestJob(root.dir, 'churn', data, testJob(24, { minPeers: 3, syncEvery: 8, momentumCarry: 0.75, outerLr: 1, outerMomentum: 0 }));
    const vs = [volunteer(job.url, 'a', 'wasm'), volunteer(job.url, 'b', 'wasm'), frozenVolunteer(job.url, 'victim', /round at step 9 .*all-reduce/)];
    spawned.push(...vs);
    const victim = vs[2]!;
    // Kill the victim while it hangs as it starts the all-reduce of the second round (steps 9..16). Killed on the line alone
    // (polled every 50 ms), its all-reduce could end and the round commit with it first (a clean clone saw no abort once).
    await untilFrozen(victim, 120_000, 'the victim to reach the all-reduce of the second round');
    // Hold the job at its next boundary, the one after the abort, until the joiner is connected. Asked before the kill:
    // asked after the abort is seen (polled every 50 ms), the survivors' re-run, which reuses their inner steps, could
    // already have committed and the last round begun without the joiner (CI saw rings of 3, 2, 2 once).
    job.driver.pause();
    victim.kill('SIGKILL');
    await until(() => job.events.some((e) => e.type === 'step-aborted' && e.step === 9), 60_000, 'the coordinator to abort the round at step 9');
    const joiner = volunteer(job.url, 'joiner', 'wasm');
    spawned.push(joiner);
    await until(() => joiner.lines.some((l) => /joined as/.test(l)), 60_000, 'the joiner to join');
    job.driver.resume();
    await job.driver.finished;
    await job.close();
    for (const v of [vs[0]!, vs[1]!, joiner]) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    // The survivors did not redo their inner steps: they reused what they had computed.
    for (const v of [vs[0]!, vs[1]!]) expect(v.lines.some((l) => /round at step 9: reusing the \d+ images/.test(l)), v.lines.join('\n')).toBe(true);
    const rounds = await checkRounds(job.jobDir, [8, 16, 24]);
    expect(rounds.map((r) => r.ring), `${job.lines.slice(-40).join('\n')}\njoiner:\n${joiner.lines.slice(-20).join('\n')}`).toEqual([3, 2, 3]);
    const records = await metricsOf(job.jobDir);
    expect(lossAborts(records), abortsText(records)).toEqual([9]);
    // Full rounds have 8 x 24 images; the round without the victim only the survivors' slices.
    const imagesOf = (step: number) => records.reduce((n, r) => n + (r.type === 'step' && r.step === step ? r.peers.reduce((a, p) => a + p.images, 0) : 0), 0);
    expect([imagesOf(8), imagesOf(24)]).toEqual([8 * 24, 8 * 24]);
    expect(imagesOf(16)).toBeGreaterThan(0);
    expect(imagesOf(16)).toBeLessThan(8 * 24);
  });
});
