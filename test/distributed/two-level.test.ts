// The two-level all-reduce end to end (coordinator/two-level.ts, src/client/step-rings.ts,
// src/comm/hierarchical.ts): real volunteer processes (wasm, node-datachannel WebRTC)
// and a real coordinator whose job forces two levels on a small ring (twoLevelFrom), so the
// ring is cut into groups of 2 and each peer forms a group ring and a column ring.
//   equivalence: 4 peers in 2 groups of 2 hold bitwise-identical weights after every step
//     (one checksum per step) and end equal to 1 peer with the same global batch;
//   a lost peer: one of 4 hangs inside the two-level all-reduce of step 3 (`--freeze-at`) and is
//     SIGKILLed there; the step is
//     re-run by the 3 survivors (two levels again: groups of 1 and 2) with the gradient sums
//     they kept, every step is committed once, nobody honest is evicted, and the weights equal
//     the one-peer run's;
//   rounds: 4 peers in rounds of 4 inner steps sum their weight changes in two levels and hold
//     the same weights after every round.
// 4 volunteers, not 5-6: this host has 2 CPU cores for the coordinator and every volunteer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import {
  abortsText, buildTestData, stepsLogged, finalWeights, frozenVolunteer, lossAborts, metricsOf, onePeerWeights, relDiff, startTestJob, stopAll, tempRoot,
  testJob, until, volunteer, untilFrozen,
} from '../../testbed/jobs.ts';

const K = 6;
/** The step (1-based) the victim dies in. */
const S = 3;
let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];
/** One peer's weights on the wasm engine (every test runs there: 5x faster here than Dawn over llvmpipe). */
let singleWasm: Float32Array;

beforeAll(async () => {
  root = await tempRoot('two-level');
  data = await buildTestData(root.dir);
  const w = await onePeerWeights(root.dir, 'single-wasm', data, testJob(K), 'wasm');
  expect(w.step).toBe(K);
  singleWasm = w.weights;
}, 300_000);

afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

/** "all-reduce of N floats over group G of 2 (2 peers) + column of 2" lines: the two levels were used. */
const twoLevelLines = (v: LocalVolunteer) => v.lines.filter((l) => /all-reduce of \d+ floats over group \d+ of \d+/.test(l));

describe('two-level all-reduce with real volunteers', () => {
  it('4 peers in 2 groups of 2: one checksum per step, weights equal 1 peer with the same batch', async () => {
    const job = await startTestJob(root.dir, 'four', data, testJob(K, { minPeers: 4, twoLevelFrom: 4 }));
    const vs = ['a', 'b', 'c', 'd'].map((n) => volunteer(job.url, `four-${n}`, 'wasm'));
    spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const records = await metricsOf(job.jobDir);
    // Every step's all-reduce ran on two levels. An attempt the coordinator aborted (a ring formed
    // again after a link was lost as it formed: 1 full suite in 2 beside a busy loop) runs it once
    // more, so a volunteer may log a step twice, at most once more per abort.
    const aborts = records.filter((r) => r.type === 'abort').length;
    for (const v of vs) {
      const lines = twoLevelLines(v);
      const stepsRun = stepsLogged(lines, /step (\d+) all-reduce/);
      expect(stepsRun, v.lines.join('\n')).toEqual(Array.from({ length: K }, (_, i) => i + 1));
      expect(lines.length, `${abortsText(records)}\n${v.lines.join('\n')}`).toBeLessThanOrEqual(K + aborts);
    }
    const steps = records.filter((r) => r.type === 'step');
    expect(steps.map((r) => r.step)).toEqual(Array.from({ length: K }, (_, i) => i + 1));
    for (const r of steps) {
      expect(r.ring, `step ${r.step}`).toBe(4);
      expect(new Set(r.peers.map((p) => p.checksum)).size, `step ${r.step} checksums`).toBe(1);
    }
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, singleWasm);
    console.log(`two-level, 4 peers (2 groups of 2) vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  }, 300_000);

  it('a peer killed inside the two-level all-reduce: the survivors re-run the step in two levels, nobody honest is evicted', async () => {
    const job = await startTestJob(root.dir, 'kill', data, testJob(K, { minPeers: 4, twoLevelFrom: 3 }));
    const vs = [
      ...['a', 'b', 'c'].map((n) => volunteer(job.url, `kill-${n}`, 'wasm')), frozenVolunteer(job.url, 'kill-victim', new RegExp(`step ${S} all-reduce`)),
    ];
    spawned.push(...vs);
    const victim = vs[3]!;
    const survivors = vs.slice(0, 3);
    // It hangs there until killed.
    await untilFrozen(victim, 180_000, `the victim to start the all-reduce of step ${S}`);
    victim.kill('SIGKILL');
    await victim.exited;
    await job.driver.finished;
    await job.close();
    for (const v of survivors) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    expect(twoLevelLines(victim).length, 'the victim was inside a two-level all-reduce').toBeGreaterThan(0);
    // The survivors were inside the collective when it broke (or it was closed under them).
    const interrupted = survivors.some((v) => v.lines.some((l) => new RegExp(`step ${S} generation \\d+: `).test(l)));
    expect(interrupted, survivors.flatMap((v) => v.lines).join('\n')).toBe(true);
    const records = await metricsOf(job.jobDir);
    const steps = records.filter((r) => r.type === 'step');
    expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
    for (const r of steps) expect(new Set(r.peers.map((p) => p.checksum)).size, `step ${r.step} checksums`).toBe(1);
    expect(lossAborts(records), abortsText(records)).toEqual([S]);
    const rerun = steps[S - 1]!;
    expect(rerun.ring).toBe(3);
    // The survivors added the sums they kept (copied before the two-level all-reduce summed in place).
    expect(rerun.peers.every((p) => (p.reused ?? 0) > 0), JSON.stringify(rerun.peers)).toBe(true);
    expect(rerun.peers.reduce((n, p) => n + p.images, 0)).toBe(24);
    // The re-run and the steps after it ran in two levels too (3 peers: groups of 1 and 2).
    for (const v of survivors) expect(
      twoLevelLines(v).some((l) => /over group \d+ of 2 \(\d peers?\)/.test(l) && l.includes(`step ${S} `)), v.lines.join('\n'),
    ).toBe(true);
    // Only the victim left; no honest peer was evicted. (The victim itself may leave as evicted: its
    // neighbours on direct links hear its sockets close at once and blame it before its session's
    // close reaches the coordinator.)
    const victimId = victim.lines.map((l) => /joined as (\S+)/.exec(l)?.[1]).find((x) => x !== undefined);
    const left = job.events.filter((e) => e.type === 'peer-left');
    expect(left.map((e) => (e.type === 'peer-left' ? e.peerId : '')), JSON.stringify(left)).toEqual([victimId]);
    const { weights } = await finalWeights(job.jobDir);
    const diff = relDiff(weights, singleWasm);
    console.log(`two-level, 4 peers with one killed in step ${S} vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  }, 300_000);

  it('rounds (syncEvery 4): the weight changes are summed in two levels, every peer holds the same weights after each round', async () => {
    const job = await startTestJob(root.dir, 'rounds', data, testJob(8, { minPeers: 4, twoLevelFrom: 4, syncEvery: 4 }));
    const vs = ['a', 'b', 'c', 'd'].map((n) => volunteer(job.url, `rounds-${n}`, 'wasm'));
    spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const rounds = /round at step (\d+) .* all-reduce of \d+ floats over group \d+ of 2/;
    for (const v of vs) expect(stepsLogged(v.lines, rounds), v.lines.join('\n')).toEqual([1, 5]);
    const steps = (await metricsOf(job.jobDir)).filter((r) => r.type === 'step');
    expect(steps.map((r) => [r.step, r.ring, r.traffic?.innerSteps])).toEqual([[4, 4, 4], [8, 4, 4]]);
    for (const r of steps) expect(new Set(r.peers.map((p) => p.checksum)).size, `round ending at step ${r.step}`).toBe(1);
  }, 300_000);
});
