// Verified rounds end to end on loopback (a job's `verify` with syncEvery > 1; coordinator/audits.ts,
// src/client/rounds.ts recompute): a real coordinator and Node volunteers on wasm, one dishonest
// (`--adversary`, a flag the usage does not show), in rounds of 3 inner steps with the momentum carry.
//   honest, mixed engines: a WebGPU peer and two wasm peers, every round recomputed by another
//     member: no dispute (3 inner steps keep the engines' spread inside the audit's tolerance);
//   a consistent cheater (sends its round's change sign-flipped and reports that): an auditor
//     recomputes its round from the round's start, disagrees, more auditors settle it, and only the
//     cheater is evicted; the honest finish every round once with one checksum;
//   a liar (sends the flipped change, reports the honest one's sketch and disguised hop records): its
//     successors' records name it in 3 attempts of its first round (a ring of 4); the honest finish.
import { describe, expect, it } from 'vitest';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';
import { adversaryVolunteer, metricsOf, peerNames, startTestJob, testJob, until, volunteer, type TestJob } from '../../testbed/jobs.ts';
import { distributedFixture } from './fixture.ts';

const bed = distributedFixture('verify-rounds');

/** 12 steps in rounds of 3, every member audited in every round. */
const ROUNDS = { minPeers: 4, verify: 1, stealFraction: 0, syncEvery: 3, momentumCarry: 0.75, outerLr: 1, outerMomentum: 0 };
type Tally = Extract<MetricRecord, { type: 'verification' }>;

/** Runs a verified rounds job with 3 honest volunteers and one adversary of `kind` until it is convicted and the job ends. */
async function convicts(name: string, kind: string, verdict: RegExp): Promise<{ job: TestJob; verdicts: string[]; records: MetricRecord[] }> {
  const job = await startTestJob(bed.dir, name, bed.data, testJob(12, ROUNDS));
  const honest = ['a', 'b', 'c'].map((n) => volunteer(job.url, n, 'wasm'));
  const bad = adversaryVolunteer(job.url, 'bad', kind);
  bed.spawned.push(...honest, bad);
  try {
    await until(() => job.lines.some((l) => verdict.test(l)), 150_000, `the ${kind} adversary convicted`);
  } catch (e) {
    const story = [...job.lines.filter((l) => /verification|evict|left|abort/i.test(l)).slice(-30), '--- bad:', ...bad.lines.slice(-15)];
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n${story.join('\n')}`);
  }
  await job.driver.finished;
  await job.close();
  for (const v of honest) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
  const verdicts = job.lines.filter((l) => l.includes('verification:'));
  console.log(`verified rounds, ${kind}:\n${verdicts.join('\n')}`);
  // Only the adversary left; every round committed (its last attempt) by the three honest with one checksum.
  const names = peerNames(job.events);
  for (const l of job.events) if (l.type === 'peer-left') expect(names.get(l.peerId), l.reason).toBe('bad');
  const records = await metricsOf(job.jobDir);
  const last = latestPerStep(records);
  expect(last.at(-1)?.step).toBe(12);
  for (const r of last.filter((s) => s.step > 3)) {
    expect(r.ring, `step ${r.step}`).toBe(3);
    expect(new Set(r.peers.map((p) => p.checksum)).size).toBe(1);
  }
  const tallies = records.filter((r): r is Tally => r.type === 'verification');
  expect(tallies.filter((t) => t.convicted).map((t) => t.convicted)).toEqual([['bad']]);
  return { job, verdicts, records };
}

describe('verified rounds (verify > 0, syncEvery > 1)', () => {
  it('honest peers on WebGPU and wasm, every member\'s round recomputed every round: no dispute, nobody evicted', async () => {
    const job = await startTestJob(bed.dir, 'honest', bed.data, testJob(12, { ...ROUNDS, minPeers: 3 }));
    const vs = [volunteer(job.url, 'gpu', 'webgpu'), volunteer(job.url, 'cpu1', 'wasm'), volunteer(job.url, 'cpu2', 'wasm')];
    bed.spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    expect(job.lines.filter((l) => l.includes('verification:'))).toEqual([]);
    expect(job.events.filter((e) => e.type === 'peer-left')).toEqual([]);
    const audits = vs.flatMap((v) => v.lines.filter((l) => /audits \S+'s round of \d+ images/.test(l)));
    expect(audits.length).toBeGreaterThanOrEqual(4 * 3 - 3); // every member, every round (a generation's first may form late)
    const last = (await metricsOf(job.jobDir)).filter((r): r is Tally => r.type === 'verification').at(-1)!;
    expect(last).toMatchObject({ caught: 0, disputes: 0 });
    expect(last.auditedImages / last.computedImages).toBeGreaterThan(0.5);
  });

  it('a cheater that sends its round\'s change sign-flipped is caught by auditors recomputing its round, and evicted', async () => {
    const { verdicts } = await convicts('flip', 'sign-flip', /verification: .*differs from \d+ of \d+ members' recomputations/);
    // A dispute first (nobody accused): an auditor recomputed the round from its start and disagreed.
    expect(verdicts[0]).toMatch(/recomputation of \S+'s slice disagrees with it .*before anyone is accused/);
  });

  it('a liar in rounds is named by its successors\' hop records and evicted', async () => {
    const { verdicts } = await convicts('lie', 'lie', /verification: .*disagree with those of \d different neighbours/);
    expect(verdicts.filter((l) => /runs again with those members apart/.test(l)).length).toBe(2);
  });
});
