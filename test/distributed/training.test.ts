// Distributed training end to end on loopback: a real coordinator (HTTP, PeerJS signaling,
// session sockets, checkpoint folder) and volunteers as separate Node processes with Dawn
// WebGPU and node-datachannel WebRTC (all but the first test on the wasm engine, 5x faster here
// than Dawn over llvmpipe: their subject is not the engine; the churn test's victim hangs inside
// the all-reduce, `--freeze-at`, until it is killed there).
//   equivalence: 3 peers with global batch B == 1 peer with B (float32 tolerance), and the 3
//     hold bitwise-identical weights after every step (their checksums agree); the same with
//     the gradient cut into 7 buckets, each summed as backward runs (src/client/sync-step.ts);
//   churn: a peer SIGKILLed in the middle of an all-reduce; the step is re-run by the 2
//     survivors (no step skipped or repeated), a 4th peer joins from a checkpoint, ends
//     bitwise equal to the others, and the final weights equal the run without the kill;
//   poison: a hostile fourth peer sends NaN, then huge values, then a false checksum; it is
//     evicted each time, no committed step includes it, the weights equal the clean run's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { modelByName } from '../../src/nn/models.ts';
import {
  abortsText, buildTestData, stepsLogged, finalWeights, frozenVolunteer, lossAborts, metricsOf, onePeerWeights, relDiff, startTestJob, stopAll, tempRoot,
  testJob, until, volunteer, untilFrozen,
} from '../../testbed/jobs.ts';
import { PoisonPeer } from './poison-peer.ts';

const K = 12;
/** Steps 1..n. */
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];
let single: Float32Array;
/** The same reference on the wasm engine. */
let singleWasm: Float32Array;

beforeAll(async () => {
  root = await tempRoot('dist');
  data = await buildTestData(root.dir);
  // The reference: one peer with the whole batch.
  const w = await onePeerWeights(root.dir, 'single', data, testJob(K));
  expect(w.step).toBe(K);
  single = w.weights;
  singleWasm = (await onePeerWeights(root.dir, 'single-wasm', data, testJob(K), 'wasm')).weights;
});

afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

/** A job of `config` trained to its end by the volunteers `names`; every one must exit cleanly. */
async function trainToEnd(name: string, config: ReturnType<typeof testJob>, names: readonly string[], backend: 'webgpu' | 'wasm' = 'webgpu') {
  const job = await startTestJob(root.dir, name, data, config);
  const vs = names.map((n) => volunteer(job.url, n, backend));
  spawned.push(...vs);
  await job.driver.finished;
  await job.close();
  for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
  return { job, vs };
}

/** Every committed step exactly once, 1..K in order, each with one checksum shared by all its peers. */
async function checkSteps(jobDir: string): Promise<{ ring: number; checksums: string[] }[]> {
  const records = await metricsOf(jobDir);
  const steps = records.filter((r) => r.type === 'step');
  expect(steps.map((r) => r.step)).toEqual(Array.from({ length: K }, (_, i) => i + 1));
  expect(latestPerStep(records).length).toBe(K);
  return steps.map((r) => {
    const sums = new Set(r.peers.map((p) => p.checksum));
    expect(sums.size, `step ${r.step}: checksums ${[...sums].join(', ')}`).toBe(1);
    return { ring: r.ring, checksums: r.peers.map((p) => p.checksum) };
  });
}

describe('N peers train one model', () => {
  it('3 peers with global batch B: bitwise identical every step, equal to 1 peer with B', async () => {
    const { job, vs } = await trainToEnd('three', testJob(K, { minPeers: 3, evalEvery: 6 }), ['a', 'b', 'c']);
    const steps = await checkSteps(job.jobDir);
    expect(steps.every((s) => s.ring === 3)).toBe(true);
    // The default buckets (25 MiB, the last cut at 1 MiB) leave small-cnn two: its fc layers, then its convs' 0.37 MB.
    const twoBuckets = /step (\d+) all-reduce of \d+ floats over ring of 3 in 2 buckets as backward runs/;
    for (const v of vs) expect(stepsLogged(v.lines, twoBuckets), v.lines.join('\n')).toEqual(range(K));
    // Evaluation at steps 6 and 12, the 48 test images spread over the 3 peers.
    const evals = (await metricsOf(job.jobDir)).filter((r) => r.type === 'eval');
    expect(evals.map((r) => [r.step, r.samples])).toEqual([[6, 48], [12, 48]]);
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, single);
    console.log(`3 peers vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  });

  it('a peer killed mid all-reduce: the step is re-run by the survivors, a 4th joins from a checkpoint, weights as without the kill', async () => {
    const job = await startTestJob(root.dir, 'churn', data, testJob(K, { minPeers: 3 }));
    const vs = [volunteer(job.url, 'a', 'wasm'), volunteer(job.url, 'b', 'wasm'), frozenVolunteer(job.url, 'victim', /step 3 all-reduce/)];
    spawned.push(...vs);
    const victim = vs[2]!;
    // Kill the victim while it hangs, having started the all-reduce of step 3.
    await untilFrozen(victim, 120_000, 'the victim to start the all-reduce of step 3');
    // The job holds at its next boundary, the one after the abort, until the joiner is in (on wasm the 9 steps left take
    // less than its process's start). Asked before the kill, so that no step runs between the abort and the pause.
    job.driver.pause();
    victim.kill('SIGKILL');
    await until(() => job.events.some((e) => e.type === 'step-aborted' && e.step === 3), 60_000, 'the coordinator to abort step 3');
    const joiner = volunteer(job.url, 'joiner', 'wasm');
    spawned.push(joiner);
    await until(() => joiner.lines.some((l) => /joined as/.test(l)), 60_000, 'the joiner to join');
    job.driver.resume();
    await job.driver.finished;
    await job.close();
    for (const v of [vs[0]!, vs[1]!, joiner]) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    // The victim died inside the all-reduce of step 3: it began it and never finished the step.
    expect(victim.lines.some((l) => /volunteer: step 3 ring/.test(l)), victim.lines.join('\n')).toBe(false);
    // The survivors were inside the collective when it broke.
    const interrupted = [vs[0]!, vs[1]!].some((v) => v.lines.some((l) => /step 3 generation \d+: /.test(l)));
    expect(interrupted, [...vs[0]!.lines, ...vs[1]!.lines].join('\n')).toBe(true);
    // Their step machines took the failure path (src/client/step-machine.ts), and it says why.
    const aborted = [vs[0]!, vs[1]!].some((v) => v.lines.some((l) => /step 3: SyncAllReduce -> Aborted \(.+\)/.test(l)));
    expect(aborted, [...vs[0]!.lines, ...vs[1]!.lines].join('\n')).toBe(true);
    const steps = await checkSteps(job.jobDir);
    expect(steps[2]!.ring, 'step 3 was committed by the 2 survivors').toBe(2);
    expect(steps[K - 1]!.ring, 'the joiner is in the ring at the end').toBe(3);
    const records = await metricsOf(job.jobDir);
    expect(lossAborts(records), abortsText(records)).toEqual([3]);
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, singleWasm);
    console.log(`churn run vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  });

  it('small gradient buckets (bucketBytes 64 KiB: 7 buckets) summed as backward runs: bitwise identical every step, equal to 1 peer', async () => {
    const { job, vs } = await trainToEnd('buckets', testJob(K, { minPeers: 3, bucketBytes: 64 << 10 }), ['buckets-a', 'buckets-b', 'buckets-c'], 'wasm');
    const steps = await checkSteps(job.jobDir);
    expect(steps.every((s) => s.ring === 3)).toBe(true);
    // Every step's all-reduce ran bucketed: 7 buckets (bucketPlan of small-cnn at 64 KiB).
    const sevenBuckets = /step (\d+) all-reduce of \d+ floats over ring of 3 in 7 buckets as backward runs/;
    for (const v of vs) expect(stepsLogged(v.lines, sevenBuckets), v.lines.join('\n')).toEqual(range(K));
    // And reported the overlap's split of its time.
    const records = (await metricsOf(job.jobDir)).filter((r) => r.type === 'step');
    for (const r of records) for (const p of r.peers) expect(p.exposedCommMs !== undefined && p.overheadMs !== undefined, JSON.stringify(p)).toBe(true);
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, singleWasm);
    console.log(`3 peers, 7 buckets vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  });

  it('label smoothing, a job setting, reaches every peer: 2 peers equal 1 peer with it, and both differ from the plain job', async () => {
    // 2 peers' sums round differently from 1 peer's: at LARS 0.5 the two parted by 1.02e-3 after 12 steps once (1 run,
    // after the wasm convolutions' rounding changed); testJob's rate (GENTLE_LARS) keeps them near the rounding.
    const { job: solo } = await trainToEnd('smooth-1', testJob(K, { labelSmoothing: 0.2 }), ['smooth-solo'], 'wasm');
    const { job: two } = await trainToEnd('smooth-2', testJob(K, { labelSmoothing: 0.2, minPeers: 2 }), ['s1', 's2'], 'wasm');
    const { job: plain } = await trainToEnd('smooth-0', testJob(K), ['plain-solo'], 'wasm');
    await checkSteps(two.jobDir);
    const a = (await finalWeights(solo.jobDir)).weights;
    const b = (await finalWeights(two.jobDir)).weights;
    const diff = relDiff(b, a), changed = relDiff(a, (await finalWeights(plain.jobDir)).weights);
    console.log(`label smoothing: 2 peers vs 1 peer ${diff.toExponential(2)}, smoothed vs plain ${changed.toExponential(2)}`);
    expect(diff, '2 peers vs 1 peer, both smoothed').toBeLessThan(1e-4);
    expect(changed, 'smoothed vs plain: the setting changed the training').toBeGreaterThan(1e-3);
  });

  it('a poisoned volunteer (NaN, then huge values, then a false checksum) is evicted each time; the others\' weights equal a clean run\'s', async () => {
    const job = await startTestJob(root.dir, 'poison', data, testJob(K, { minPeers: 4 }));
    const vs = ['a', 'b', 'c'].map((n) => volunteer(job.url, n, 'wasm'));
    spawned.push(...vs);
    // Join after the honest three so that the ring's first peer (the uploader) is honest.
    await until(() => job.driver.status().peers === 3, 120_000, 'the honest volunteers to connect');
    const layout = layoutOf(modelByName('small-cnn', [1, 28, 28], 10));
    const reasons: string[] = [];
    const ids: string[] = [];
    for (const poison of ['nan', 'huge', 'checksum'] as const) {
      const p = await PoisonPeer.join(job.url, layout);
      ids.push(p.id);
      reasons.push(await p.attack(poison));
    }
    // Each with the reporter's own words about the frame it refused (protocol 7's detail).
    expect(reasons[0]).toMatch(/ring failed .*bad-frame, reported by [\w-]+: .+\)$/);
    expect(reasons[1]).toMatch(/ring failed .*bad-frame, reported by [\w-]+: .+\)$/);
    expect(reasons[2]).toMatch(/differ from the ring/);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const refusals = vs.flatMap((v) => v.lines.filter((l) => /non-finite value|values far too large/.test(l)));
    // On failure, every collective failure the honest peers logged (it failed once in a full
    // suite with no 'non-finite' line: this shows what refused the NaN frame instead).
    const failures = vs.flatMap((v, i) => v.lines.filter((l) => /volunteer: step \d+ generation \d+: /.test(l)).map((l) => `${['a', 'b', 'c'][i]}: ${l}`));
    expect(
      refusals.some((l) => /non-finite/.test(l)) && refusals.some((l) => /far too large/.test(l)),
      `refusals:\n${refusals.join('\n')}\ncollective failures:\n${failures.join('\n')}\nevictions: ${reasons.join(' | ')}`,
    ).toBe(true);
    const records = await metricsOf(job.jobDir);
    const steps = latestPerStep(records);
    expect(steps.map((r) => r.step)).toEqual(Array.from({ length: K }, (_, i) => i + 1));
    for (const r of steps) {
      expect(new Set(r.peers.map((q) => q.checksum)).size, `step ${r.step}`).toBe(1);
      expect(r.peers.some((q) => ids.includes(q.peerId)), `no committed step counts the poisoned peer (step ${r.step})`).toBe(false);
    }
    expect(lossAborts(records).length, abortsText(records)).toBeGreaterThanOrEqual(3);
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, singleWasm);
    console.log(`poisoned run vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  });
});

