// Verified steps end to end on loopback (a job's `verify`; coordinator/audits.ts): a real
// coordinator and volunteers as Node processes, one of them dishonest (`--adversary`, a flag the
// usage does not show).
//   honest, mixed engines: a WebGPU peer and two wasm peers, every member audited every step: no
//     dispute, nobody evicted (the engines' float32 spread stays inside the audit's tolerance);
//   a consistent cheater (sends its gradient sign-flipped and reports that): the first audit that
//     disagrees accuses nobody, a second auditor settles it, and only the cheater is evicted;
//     the honest members finish the job, every committed step with one checksum;
//   a liar (sends the flipped gradient, reports the honest one's sketch): the sketches do not add
//     up to the ring's sum, the step runs again with everyone audited, and the second failure
//     halts the job with the reason instead of committing a sum nobody can vouch for.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnVolunteer, type LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { buildTestData, metricsOf, startTestJob, stopAll, tempRoot, testJob, until, volunteer } from '../../testbed/jobs.ts';

let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];

beforeAll(async () => {
  root = await tempRoot('verify');
  data = await buildTestData(root.dir);
});

afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

const VERIFIED = { verify: 1, stealFraction: 0 };
const adversary = (url: string, name: string, kind: string): LocalVolunteer =>
  spawnVolunteer({ url, name, args: ['--no-tune', '--rejoin-for', '0', '--backend', 'wasm', '--adversary', kind] });

describe('verified steps (verify > 0)', () => {
  it('honest peers on WebGPU and wasm, every member audited every step: no dispute, nobody evicted', async () => {
    const job = await startTestJob(root.dir, 'honest', data, testJob(8, { minPeers: 3, ...VERIFIED }));
    const vs = [volunteer(job.url, 'gpu', 'webgpu'), volunteer(job.url, 'cpu1', 'wasm'), volunteer(job.url, 'cpu2', 'wasm')];
    spawned.push(...vs);
    await job.driver.finished;
    await job.close();
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    expect(job.lines.filter((l) => l.includes('verification:'))).toEqual([]);
    expect(job.events.filter((e) => e.type === 'peer-left')).toEqual([]);
    const audits = vs.flatMap((v) => v.lines.filter((l) => /audits \S+'s slice/.test(l)));
    expect(audits.length).toBeGreaterThanOrEqual(8 * 3 - 3); // every member, every step (a generation's first may form late)
  });

  it('a cheater that reports what it sends is caught by two audits and evicted; the honest finish', async () => {
    const job = await startTestJob(root.dir, 'flip', data, testJob(10, { minPeers: 4, ...VERIFIED }));
    const honest = ['a', 'b', 'c'].map((n) => volunteer(job.url, n, 'wasm'));
    const bad = adversary(job.url, 'bad', 'sign-flip');
    spawned.push(...honest, bad);
    await until(() => job.lines.some((l) => /verification: .*differs from two members' recomputations/.test(l)), 180_000, 'the cheater convicted');
    await job.driver.finished;
    await job.close();
    for (const v of honest) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    const verdicts = job.lines.filter((l) => l.includes('verification:'));
    console.log(`verification, a sign-flipping cheater:\n${verdicts.join('\n')}`);
    // A dispute first (nobody accused), then the conviction; every eviction is the cheater's.
    expect(verdicts[0]).toMatch(/recomputation of \S+'s slice disagrees with it .*before anyone is accused/);
    const names = new Map<string, string>();
    for (const e of job.events) if (e.type === 'generation') for (const p of e.peers) names.set(p.id, p.name ?? p.id);
    const left = job.events.filter((e) => e.type === 'peer-left');
    expect(left.length).toBeGreaterThanOrEqual(1);
    for (const l of left) if (l.type === 'peer-left') expect(names.get(l.peerId), l.reason).toBe('bad');
    const steps = (await metricsOf(job.jobDir)).filter((r) => r.type === 'step');
    expect(steps.map((r) => r.step)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    for (const r of steps) expect(new Set(r.peers.map((p) => p.checksum)).size).toBe(1);
  });

  it('a liar (sends one gradient, reports another) fails the sum check twice and the job halts saying why', async () => {
    const job = await startTestJob(root.dir, 'lie', data, testJob(10, { minPeers: 4, ...VERIFIED }));
    const vs = [...['a', 'b', 'c'].map((n) => volunteer(job.url, n, 'wasm')), adversary(job.url, 'liar', 'lie')];
    spawned.push(...vs);
    const reason = await Promise.race([
      job.driver.halted,
      new Promise<string>((_, rej) => setTimeout(() => rej(new Error(`no halt:\n${job.lines.slice(-20).join('\n')}`)), 180_000)),
    ]);
    expect(reason).toMatch(/do not add up to the ring's sum .*twice/);
    const verdicts = job.lines.filter((l) => l.includes('verification:'));
    expect(verdicts[0]).toMatch(/do not add up to the ring's sum .*every member audited/);
    // Nothing it touched was committed: no step record at all (it lies from the first step).
    expect((await metricsOf(job.jobDir)).filter((r) => r.type === 'step')).toEqual([]);
    await stopAll(vs);
    await job.close();
  });
});
