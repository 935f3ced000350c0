// A lost peer costs its slice, not the step, end to end: 3 real volunteer processes (wasm,
// node-datachannel WebRTC) and a real coordinator; one hangs (`--freeze-at`) and is SIGKILLed
// (a) as it starts computing its slice of step 3 and (b) inside the all-reduce of step 3. Then:
//   - every step 1..K is committed exactly once, and step 3 was aborted once;
//   - the committed step 3 used exactly the sampler's ids of step 3 (as the one-peer run did);
//   - the survivors did not compute their own slices again: the step-3 record says what each
//     reused, and what they computed between them is exactly the victim's slice;
//   - the final weights equal one peer's run of the same job (the equivalence tolerance).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import { sampleDigest } from '../../coordinator/slice-rerun.ts';
import { CreditLedger, creditView, type CreditView } from '../../coordinator/credit.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { stepSamples } from '../../src/train/sampler.ts';
import {
  abortsText, buildTestData, finalWeights, formedAgainSteps, lossAborts, metricsOf, onePeerWeights, peerNames, relDiff, startTestJob, stopAll,
  tempRoot, testJob, until, volunteer, frozenVolunteer, untilFrozen,
} from '../../testbed/jobs.ts';

const K = 8;
/** The step (1-based) the victim dies in. */
const S = 3;
let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];
let single: Float32Array;
let singleSamples: string | undefined;

beforeAll(async () => {
  root = await tempRoot('rerun');
  data = await buildTestData(root.dir);
  const w = await onePeerWeights(root.dir, 'single', data, testJob(K), 'wasm');
  expect(w.step).toBe(K);
  single = w.weights;
  singleSamples = latestPerStep(await metricsOf(w.jobDir))[S - 1]?.samples;
});

afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

/** "volunteer: step S computes C of N images (R reused)" lines of step S. */
const computeLines = (v: LocalVolunteer) => v.lines.map((l) => new RegExp(`step ${S} computes (\\d+) of (\\d+) images \\((\\d+) reused\\)`).exec(l))
  .filter((m): m is RegExpExecArray => m !== null).map((m) => ({ computed: Number(m[1]), images: Number(m[2]), reused: Number(m[3]) }));

async function killedRun(name: string, killAt: RegExp, died: (victim: LocalVolunteer) => void): Promise<void> {
  const job = await startTestJob(root.dir, name, data, testJob(K, { minPeers: 3 }));
  const vs = [volunteer(job.url, `${name}-a`, 'wasm'), volunteer(job.url, `${name}-b`, 'wasm'), frozenVolunteer(job.url, `${name}-victim`, killAt)];
  spawned.push(...vs);
  const victim = vs[2]!;
  const survivors = [vs[0]!, vs[1]!];
  // It hangs at that line until killed.
  await untilFrozen(victim, 120_000, `the victim to log ${killAt}`);
  victim.kill('SIGKILL');
  await victim.exited;
  await job.driver.finished;
  // The credit board as the dashboard reads it, before the coordinator closes.
  const board = (await (await fetch(`${job.url}/api/credit`)).json()) as CreditView;
  await job.close();
  for (const v of survivors) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
  died(victim);

  const records = await metricsOf(job.jobDir);
  // Credit under churn and a re-run: the donors' images are the committed steps' images (K x 24),
  // the killed peer keeps what it committed before step S and nothing of its lost attempt, and a
  // ledger rebuilt from the job's records (a restarted coordinator's) says the same.
  const committed = latestPerStep(records).filter((r) => r.type === 'step');
  const names = peerNames(records);
  const imagesOf = (who: string) => committed.reduce(
    (n, r) => n + (r.type === 'step' ? r.peers.filter((p) => names.get(p.peerId) === who).reduce((a, p) => a + p.images, 0) : 0), 0,
  );
  expect(board.images, 'credited images = images of the committed steps').toBe(K * 24);
  expect(board.board.reduce((n, b) => n + b.images, 0)).toBe(K * 24);
  for (const v of vs) expect(board.board.find((b) => b.name === v.name)?.images ?? 0, `${v.name}'s credit`).toBe(imagesOf(v.name));
  expect(board.board.find((b) => b.name === victim.name)?.steps, 'the victim: the steps before the one it died in').toBe(S - 1);
  const rebuilt = new CreditLedger();
  for (const r of records) rebuilt.add(r);
  expect(creditView(rebuilt, 20, null)).toEqual(board);
  const steps = records.filter((r) => r.type === 'step');
  expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
  for (const r of steps) expect(new Set(r.peers.map((p) => p.checksum)).size, `step ${r.step} checksums`).toBe(1);
  expect(lossAborts(records), abortsText(records)).toEqual([S]);
  // The ring of the survivors may have formed again in step S (a link lost as it formed): that
  // attempt reused every member's whole sum, so the committed record then shows nothing computed.
  const formedAgainAtS = formedAgainSteps(records).includes(S);
  const rerun = steps[S - 1]!;
  expect(rerun.ring).toBe(2);
  // Exactly the step's samples: the sampler's ids (seed 3, B 24, 600 train images), as the one-peer run committed.
  const want = sampleDigest([stepSamples(3, S - 1, 24, 600).ids]);
  expect(rerun.samples).toBe(want);
  expect(singleSamples).toBe(want);
  // The victim's slice was computed by the survivors, and only that.
  const victimSlice = computeLines(victim)[0]!;
  expect(victimSlice.reused).toBe(0);
  expect(rerun.peers.every((p) => (p.reused ?? 0) > 0), JSON.stringify(rerun.peers)).toBe(true);
  expect(rerun.peers.reduce((n, p) => n + p.images - (p.reused ?? 0), 0)).toBe(formedAgainAtS ? 0 : victimSlice.images);
  expect(rerun.peers.reduce((n, p) => n + p.images, 0)).toBe(24);
  let computedAfter = 0;
  for (const v of survivors) {
    const lines = computeLines(v);
    // Its own slice once (the aborted attempt), then only its share of the victim's (and, had the
    // ring formed again, one attempt computing nothing).
    expect(lines.length, v.lines.join('\n')).toBe(formedAgainAtS ? 3 : 2);
    expect(lines[0]!.reused).toBe(0);
    expect(lines[1]!.reused).toBe(lines[0]!.images);
    expect(lines[1]!.computed).toBe(lines[1]!.images - lines[1]!.reused);
    if (formedAgainAtS) expect(lines[2]).toEqual({ computed: 0, images: lines[1]!.images, reused: lines[1]!.images });
    computedAfter += lines.slice(1).reduce((n, l) => n + l.computed, 0);
  }
  expect(computedAfter, 'the survivors computed the victim slice between them, once').toBe(victimSlice.images);
  const { weights } = await finalWeights(job.jobDir);
  const diff = relDiff(weights, single);
  console.log(`${name}: 3 peers, one killed in step ${S}, vs 1 peer after ${K} steps: max |dw| / max |w| = ${diff.toExponential(2)}`);
  expect(diff).toBeLessThan(1e-3);
}

describe('a lost peer costs its slice, not the step', () => {
  it('a peer killed while it computes: the survivors add their kept sums to its ids, the step commits with the same samples', async () => {
    await killedRun('kill-compute', new RegExp(`step ${S} computes`), (victim) => {
      // It died inside its compute: it never started the all-reduce.
      expect(victim.lines.some((l) => new RegExp(`step ${S} all-reduce`).test(l)), victim.lines.join('\n')).toBe(false);
    });
  });

  it('a peer killed inside the all-reduce: the survivors reuse the copies kept before the all-reduce summed in place', async () => {
    await killedRun('kill-allreduce', new RegExp(`step ${S} all-reduce`), (victim) => {
      expect(victim.lines.some((l) => new RegExp(`step ${S} all-reduce`).test(l))).toBe(true);
    });
  });
});
