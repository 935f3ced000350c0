// Work stealing at each step's end (coordinator/tail-pool.ts), end to end: 3 real volunteer
// processes (Dawn WebGPU, node-datachannel WebRTC) and a real coordinator, a job that keeps half
// of every slice back as the step's tail. One volunteer is throttled to a fifth of its device.
// (The kill and the defaults run on wasm, the victim hanging where it is killed: `--freeze-at`.)
// Checked:
//   - every step 1..K is committed exactly once, with the sampler's ids (as one peer commits them);
//   - the tail went to whoever claimed it: the throttled peer ends up with less of the steps;
//   - the final weights equal one peer's run of the same job (the equivalence tolerance);
//   - a peer killed holding the chunks it claimed: the survivors re-run its fixed part and grants
//     with their own kept sums (fixed + grants) reused, and the job still equals one peer;
//   - a job of the defaults (stealFraction auto) probes stealing once its ring settled, steps
//     with and without a tail in turn (coordinator/steal-tuner.ts), and still equals one peer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { spawnVolunteer } from '../../coordinator/local-volunteers.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';
import { AUTO_PROBE, AUTO_SETTLE } from '../../coordinator/steal-tuner.ts';
import {
  abortsText, buildTestData, finalWeights, frozenVolunteer, lossAborts, metricsOf,
  onePeerWeights, relDiff, startTestJob, stopAll, tempRoot, testJob, until,
  volunteer, type TestJob, untilFrozen,
} from '../../testbed/jobs.ts';
import { checkOnePeer } from '../../testbed/one-peer.ts';

type StepRecord = Extract<MetricRecord, { type: 'step' }>;

const K = 8;
/** Half of each slice waits as the tail, in chunks of 2 images (B = 24 over 3 peers: 4 fixed each, 12 in the tail). */
const STEAL = { stealFraction: 0.5, stealChunk: 2 };
let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];
let single: { weights: Float32Array; samples: (string | undefined)[] };

beforeAll(async () => {
  root = await tempRoot('steal');
  data = await buildTestData(root.dir);
  const w = await onePeerWeights(root.dir, 'single', data, testJob(K));
  expect(w.step).toBe(K);
  single = { weights: w.weights, samples: (latestPerStep(await metricsOf(w.jobDir)) as StepRecord[]).map((r) => r.samples) };
});

afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

/**
 * Waits for the job to finish with every volunteer exiting 0; checks that steps 1..n were each
 * committed once, with no loss abort and the sampler's ids `samples`; returns the step records.
 */
async function finishedCleanly(job: TestJob, vs: readonly LocalVolunteer[], n: number, samples: readonly (string | undefined)[]): Promise<StepRecord[]> {
  spawned.push(...vs);
  await job.driver.finished;
  await job.close();
  for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
  const records = await metricsOf(job.jobDir);
  const steps = records.filter((r): r is StepRecord => r.type === 'step');
  expect(steps.map((r) => r.step), `every step committed exactly once\n${abortsText(records)}`).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  expect(lossAborts(records), abortsText(records)).toEqual([]);
  expect(steps.map((r) => r.samples), 'the sampler\'s ids, as one peer committed them').toEqual(samples);
  return steps;
}

describe('work stealing at the step end', () => {
  it('3 peers, one throttled to a fifth: the tail goes to the others, every step commits the sampler\'s ids, weights equal one peer\'s', async () => {
    const job = await startTestJob(root.dir, 'throttled', data, testJob(K, { minPeers: 3, ...STEAL }));
    const slow = spawnVolunteer({ url: job.url, name: 'slow', args: ['--no-tune', '--rejoin-for', '60', '--backend', 'webgpu', '--throttle', '0.2'] });
    const vs = [volunteer(job.url, 'fast-a'), volunteer(job.url, 'fast-b'), slow];
    const steps = await finishedCleanly(job, vs, K, single.samples);
    for (const r of steps) {
      expect(new Set(r.peers.map((p) => p.checksum)).size, `step ${r.step} checksums`).toBe(1);
      expect(r.peers.reduce((n, p) => n + p.images, 0), `step ${r.step} images`).toBe(24);
    }
    // Who took the tail: the throttled peer's images over the steps against each other's.
    const slowId = steps[0]!.peers.find((p) => vs[2]!.lines.some((l) => l.includes(`joined as ${p.peerId}`)))?.peerId;
    expect(slowId, 'the throttled peer is in the ring').toBeDefined();
    const imagesOf = (id: string) => steps.reduce((n, r) => n + (r.peers.find((p) => p.peerId === id)?.images ?? 0), 0);
    const others = steps[0]!.peers.map((p) => p.peerId).filter((id) => id !== slowId);
    const claimed = steps.reduce((n, r) => n + r.peers.reduce((m, p) => m + (p.claimed ?? 0), 0), 0);
    console.log(`steal: images over ${K} steps: slow ${imagesOf(slowId!)}, others ${others.map(imagesOf).join(', ')}; ${claimed} claimed from the tails`);
    expect(claimed, 'the tails were claimed').toBeGreaterThan(0);
    // (The throttled peer finishes its fixed part so late that the others have taken the whole tail in chunks by then: no final grants.)
    for (const id of others) expect(imagesOf(id), 'a fast peer computed more than the throttled one').toBeGreaterThan(imagesOf(slowId!));
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, single.weights);
    console.log(`steal: 3 peers (one throttled) vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-4);
  });

  it('a peer killed while it claims: the survivors reuse their fixed parts and grants, compute the rest, and the job equals one peer', async () => {
    const S = 3;
    const job = await startTestJob(root.dir, 'killed', data, testJob(K, { minPeers: 3, ...STEAL }));
    // The victim hangs once its claims of step S are answered (its final grant pending with the all-reduce), until killed.
    const vs = [volunteer(job.url, 'steal-a', 'wasm'), volunteer(job.url, 'steal-b', 'wasm'),
      frozenVolunteer(job.url, 'steal-victim', new RegExp(`step ${S} took \\d+ images of the tail`))];
    spawned.push(...vs);
    const victim = vs[2]!;
    await untilFrozen(victim, 120_000, `the victim to claim in step ${S}`);
    victim.kill('SIGKILL');
    await victim.exited;
    await job.driver.finished;
    await job.close();
    for (const v of vs.slice(0, 2)) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const records = await metricsOf(job.jobDir);
    const steps = records.filter((r): r is StepRecord => r.type === 'step');
    expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
    expect(lossAborts(records), abortsText(records)).toEqual([S]);
    expect(steps.map((r) => r.samples)).toEqual(single.samples);
    // Unthrottled peers end their fixed parts together: from step 2 on (a step's times known) the rest of a tail goes in final grants.
    const finals = vs.flatMap((v) => v.lines.filter((l) => /its final grant: \d+, with the all-reduce/.test(l)));
    expect(finals.length, vs.map((v) => v.lines.filter((l) => /of the tail/.test(l)).join('\n')).join('\n')).toBeGreaterThan(0);
    const rerun = steps[S - 1]!;
    expect(rerun.ring).toBe(2);
    expect(rerun.peers.every((p) => (p.reused ?? 0) > 0), `the survivors reused their sums: ${JSON.stringify(rerun.peers)}`).toBe(true);
    expect(rerun.peers.reduce((n, p) => n + p.images, 0)).toBe(24);
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, single.weights);
    console.log(`steal: 3 peers, one killed in step ${S}, vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  });

  it('a job of the defaults (stealFraction auto): once the ring settled, steps with and without a tail in turn; ' +
    'a verdict in the log; equal to one peer', async () => {
    const N = 1 + AUTO_SETTLE + 2 * AUTO_PROBE + 3;
    // A ring's float rounding differs from one peer's (a tail splits slices another way): over these 40 steps it grew
    // to 4.7e-4 and 1.4e-3 in 2 suites of 18 at LARS 0.5 (below 5e-6 in the others), and to 2.1e-2 once at 0.1 after the
    // wasm forward's rounding changed (Winograd F(4x4, 3x3)). So where the final weights part, the ring's steps are
    // replayed on one peer from its own checkpoints (checkOnePeer): a checkpoint of every step.
    const config = (extra: Record<string, unknown> = {}) => testJob(N, { checkpointEvery: 1, keepCheckpoints: 100, ...extra });
    // On the wasm engine (5x faster here than Dawn over llvmpipe): the tuner compares the ring's own steps.
    const ref = await onePeerWeights(root.dir, 'auto-single', data, config(), 'wasm');
    const refSamples = (latestPerStep(await metricsOf(ref.jobDir)) as StepRecord[]).map((r) => r.samples);
    const job = await startTestJob(root.dir, 'auto', data, config({ minPeers: 2 }));
    const steps = await finishedCleanly(job, [volunteer(job.url, 'auto-a', 'wasm'), volunteer(job.url, 'auto-b', 'wasm')], N, refSamples);
    // The ring's first step and AUTO_SETTLE more without a tail, then the probe: other, kept, kept, other, ...
    const stole = steps.map((r) => r.peers.some((p) => (p.claimed ?? 0) > 0));
    const probe = Array.from({ length: 2 * AUTO_PROBE }, (_, i) => i % 4 === 0 || i % 4 === 3);
    expect(
      stole.slice(0, 1 + AUTO_SETTLE + 2 * AUTO_PROBE), JSON.stringify(steps.map((r) => [r.step, r.wallMs, r.peers.map((p) => p.claimed ?? 0)])),
    ).toEqual([...Array.from({ length: 1 + AUTO_SETTLE }, () => false), ...probe]);
    const verdict = job.lines.filter((l) => /^steps (run|stay) with(out)? work stealing/.test(l));
    console.log(`steal auto, 2 peers: ${verdict.join('; ')}`);
    expect(verdict.length, job.lines.join('\n')).toBe(1);
    // The steps after the probe run the way it chose.
    const chose = /^steps run with work stealing|^steps stay with work stealing/.test(verdict[0]!);
    expect(stole.slice(1 + AUTO_SETTLE + 2 * AUTO_PROBE)).toEqual([chose, chose, chose]);
    const check = await checkOnePeer(root.dir, 'auto-replay', data, config(), job.jobDir, ref.jobDir, N, 1e-3);
    console.log(`steal auto: 2 peers vs 1 peer after ${N} steps: max |dw| / max |w| = ${check.final.toExponential(2)}` +
      `${check.replays.length > 0 ? `; replayed on one peer: ${check.replays.join(', ')}` : ''}`);
    expect(check.failures).toEqual([]);
  });
});
