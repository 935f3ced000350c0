// Shared by the distributed tests and the benches (testbed/: both import it, neither imports the other): a small real data set (MNIST, first 600/120 images), a
// coordinator run in this process (real HTTP, PeerJS signaling, session sockets, checkpoint
// folder) and volunteers as real child processes (Dawn WebGPU, node-datachannel WebRTC).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { buildShards } from '../coordinator/data/cli.ts';
import { spawnVolunteer, type LocalVolunteer } from '../coordinator/local-volunteers.ts';
import { readMetrics, type MetricRecord } from '../coordinator/metrics.ts';
import type { AuditHooks } from '../coordinator/driver.ts';
import { runJob, type RunningJob } from '../coordinator/run.ts';
import { openCheckpointStore } from '../coordinator/checkpoints.ts';
import { decodeCheckpoint } from '../src/checkpoint/format.ts';
import type { TlsOption } from '../coordinator/tls.ts';
import type { LiveEvent } from '../src/protocol/messages.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { FROZEN_LINE } from '../src/client/freeze.ts';

export async function tempRoot(prefix: string): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `vt-${prefix}-`));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** MNIST's first 600 train and 120 val images as shards in `<root>/data/mnist`. */
export async function buildTestData(root: string): Promise<{ dataDir: string; manifest: Manifest }> {
  const dataDir = join(root, 'data');
  const manifest = await buildShards({ dataset: 'mnist', out: join(dataDir, 'mnist'), limit: 600, samplesPerShard: 200, progress: false });
  return { dataDir, manifest };
}

/**
 * testJob's rate. The distributed tests compare trajectories whose arithmetic differs (a ring against one peer, whose
 * gradient sums round differently; WebGPU peers beside wasm ones; rounds against sync steps). On the chaotic trajectory
 * of LARS at 0.5 a rounding difference of 1e-7 in one step grows to 1e-4..1e-2 within 10-40 steps (a ReLU or max-pool
 * near a tie takes the other branch), so their bounds passed or failed by where the ties fell; at 0.1 it stays near the
 * rounding (test/net/multihost.test.ts: 1.07e-4 at 0.5 and 1.35e-7 at 0.1 after 10 steps of a ring of WebGPU and wasm
 * peers), while a lost or doubled slice still moves the weights by far more.
 */
export const GENTLE_LARS = { kind: 'lars', lr: 0.1, warmupSteps: 2 } as const;

/** The job every distributed test trains: no BN, no dropout, so N peers == 1 peer with the same B; LARS at GENTLE_LARS. */
export function testJob(steps: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'test', model: 'small-cnn', dataset: 'mnist', globalBatch: 24, steps,
    optimizer: GENTLE_LARS, evalEvery: 0, checkpointEvery: 4, keepCheckpoints: 10, seed: 3, ...extra,
  };
}

export interface TestJob extends RunningJob {
  readonly events: LiveEvent[];
  readonly lines: string[];
  readonly jobDir: string;
}

export async function startTestJob(
  root: string, name: string, data: { dataDir: string; manifest: Manifest }, config: Record<string, unknown>,
  extra: { pageDir?: string; tls?: TlsOption; finalEvalSamples?: number; audit?: AuditHooks } = {},
): Promise<TestJob> {
  const events: LiveEvent[] = [];
  const lines: string[] = [];
  const jobDir = join(root, name);
  const job = await runJob({
    jobDir, config, dataDir: data.dataDir, manifest: data.manifest, evalSamples: 48, heartbeatMs: 1000,
    timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 20_000 },
    onEvent: (e) => events.push(e), log: (l) => lines.push(l), pageDir: extra.pageDir, tls: extra.tls,
    ...(extra.finalEvalSamples ? { finalEvalSamples: extra.finalEvalSamples } : {}), ...(extra.audit ? { audit: extra.audit } : {}),
  });
  return Object.assign(job, { events, lines, jobDir });
}

/** A headless volunteer process on the given compute path (WebGPU unless asked); `more` arguments after the usual ones. */
export function volunteer(url: string, name: string, backend: 'webgpu' | 'wasm' = 'webgpu', more: readonly string[] = []): LocalVolunteer {
  return spawnVolunteer({ url, name, args: ['--no-tune', '--rejoin-for', '60', '--backend', backend, ...more] });
}

/**
 * A wasm volunteer that hangs at its first log line matching `at` (`--freeze-at`, src/client/freeze.ts) until the test kills it there:
 * the fault tests' victim, inside the phase they name whatever the engine's speed.
 */
export function frozenVolunteer(url: string, name: string, at: RegExp): LocalVolunteer {
  return volunteer(url, name, 'wasm', ['--freeze-at', at.source]);
}

/** Waits until `v` (a frozenVolunteer) says it froze, for at most `ms`: the moment to kill it. */
export function untilFrozen(v: LocalVolunteer, ms: number, what: string): Promise<void> {
  return until(() => v.lines.some((l) => FROZEN_LINE.test(l)), ms, what);
}

/**
 * A dishonest volunteer on wasm (`--adversary KIND`, src/trust/adversary.ts; a flag the usage does not show), with a
 * private job's `token`; `rejoinFor` seconds it keeps rejoining after its session ends (0: it exits).
 */
export function adversaryVolunteer(url: string, name: string, kind: string, token?: string, rejoinFor = 0): LocalVolunteer {
  return spawnVolunteer({
    url, name, args: ['--no-tune', '--rejoin-for', String(rejoinFor), '--backend', 'wasm', '--adversary', kind, ...(token ? ['--token', token] : [])],
  });
}

/** Waits until `cond` holds, polling every 50 ms; fails after `ms` with `what`. */
export async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The final weights of `config` trained by one volunteer alone (the equivalence tests' reference),
 * and its job folder (its metrics). Fails when the volunteer does not exit cleanly.
 */
export async function onePeerWeights(
  root: string, name: string, data: { dataDir: string; manifest: Manifest }, config: Record<string, unknown>, backend: 'webgpu' | 'wasm' = 'webgpu',
): Promise<{ step: number; weights: Float32Array; jobDir: string }> {
  const solo = await startTestJob(root, name, data, config);
  const v = volunteer(solo.url, name, backend);
  try {
    await solo.driver.finished;
    const code = await v.exited;
    if (code !== 0) throw new Error(`the one-peer run's volunteer exited with ${code}:\n${v.lines.slice(-20).join('\n')}`);
    return { ...(await finalWeights(solo.jobDir)), jobDir: solo.jobDir };
  } finally {
    v.kill('SIGKILL');
    await solo.close();
  }
}

/** Each peer's name (its id when it gave none) from the generations in a job's metrics or live events. */
export function peerNames(records: readonly (MetricRecord | LiveEvent)[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const r of records) if (r.type === 'generation') for (const p of r.peers ?? []) names.set(p.id, p.name ?? p.id);
  return names;
}

/**
 * How far a finished multi-peer job's final weights (it must have reached `steps`) are from the
 * same job trained on one peer here (wasm): max |dw| / max |w|.
 */
export async function distanceFromOnePeer(
  root: string, jobDir: string, data: { dataDir: string; manifest: Manifest }, steps: number,
): Promise<number> {
  const multi = await finalWeights(jobDir);
  if (multi.step !== steps) throw new Error(`the job ended at step ${multi.step}, not ${steps}`);
  const ref = await onePeerWeights(root, 'solo', data, testJob(steps), 'wasm');
  return relDiff(multi.weights, ref.weights);
}

/**
 * One peer's steps `from` + 1 .. `to`, resumed from the checkpoint of step `from` in `fromJobDir`
 * (its weights and optimiser state), against `fromJobDir`'s own checkpoint of `to`: max |dw| / max |w|.
 * A step of a ring equals one peer's step up to float rounding; over a whole run that rounding can
 * grow (a max-pool or ReLU near a tie takes the other branch), over a few steps it cannot.
 */
export async function replayOnOnePeer(
  root: string, name: string, data: { dataDir: string; manifest: Manifest }, config: Record<string, unknown>, fromJobDir: string, from: number, to: number,
): Promise<number> {
  const source = await openCheckpointStore(join(fromJobDir, 'checkpoints'), { keep: 1000 });
  const [start, end] = await Promise.all([source.readStepFile(from), source.readStepFile(to)]);
  if (!start || !end) throw new Error(`replayOnOnePeer: ${fromJobDir} has no checkpoint of step ${start ? to : from}`);
  const dir = join(root, name);
  await mkdir(join(dir, 'checkpoints'), { recursive: true });
  await writeFile(join(dir, 'checkpoints', basename(start.path)), start.bytes);
  await writeFile(join(dir, 'job.json'), `${JSON.stringify({ jobId: 1, config })}\n`);
  const job = await startTestJob(root, name, data, config);
  if (!job.resumed) throw new Error(`replayOnOnePeer: the job in ${dir} did not resume`);
  const v = volunteer(job.url, name, 'wasm');
  try {
    // One store for the whole wait: opening one removes the temporary files of writes in flight.
    const store = await openCheckpointStore(join(dir, 'checkpoints'), { keep: 1000 });
    const deadline = Date.now() + 120_000;
    let mine = await store.readStepFile(to);
    while (!mine) {
      if (Date.now() > deadline) throw new Error(`replayOnOnePeer: no checkpoint of step ${to} after 120 s:\n${v.lines.slice(-10).join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
      mine = await store.readStepFile(to);
    }
    return relDiff(decodeCheckpoint(mine.bytes, mine.path).weights, decodeCheckpoint(end.bytes, end.path).weights);
  } finally {
    v.kill('SIGKILL');
    await job.close();
  }
}

/** The checkpoint of `step` kept in the folder of a job that has ended (it must be there and verify). */
export async function checkpointOf(jobDir: string, step: number): Promise<{ weights: Float32Array }> {
  const store = await openCheckpointStore(join(jobDir, 'checkpoints'), { keep: 1000 });
  const f = await store.readStepFile(step);
  if (!f) throw new Error(`no checkpoint of step ${step} in ${jobDir}`);
  return decodeCheckpoint(f.bytes, f.path);
}

/**
 * The steps of the checkpoints kept in the folder of a job that has ended, oldest first (opening
 * a store removes the temporary files of unfinished writes: not while a job writes there).
 */
export async function checkpointSteps(jobDir: string): Promise<number[]> {
  const store = await openCheckpointStore(join(jobDir, 'checkpoints'), { keep: 1000 });
  return (await store.list()).map((c) => c.step).sort((a, b) => a - b);
}

export async function finalWeights(jobDir: string): Promise<{ step: number; weights: Float32Array }> {
  const store = await openCheckpointStore(join(jobDir, 'checkpoints'), { keep: 100 });
  const c = await store.readNewest();
  if (!c) throw new Error(`no checkpoint in ${jobDir}`);
  return { step: c.step, weights: c.weights };
}

export const metricsOf = (jobDir: string): Promise<MetricRecord[]> => readMetrics(join(jobDir, 'metrics.jsonl'));

/** max |a - b| / max |b|: float32-rounding differences of equal maths stay far below 1e-3. */
export function relDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i]! - b[i]!));
    m = Math.max(m, Math.abs(b[i]!));
  }
  return d / m;
}

export async function stopAll(vs: readonly LocalVolunteer[]): Promise<void> {
  for (const v of vs) v.kill('SIGKILL');
  await Promise.all(vs.map((v) => v.exited));
}

type Abort = Extract<MetricRecord, { type: 'abort' }>;
const abortsOf = (records: readonly MetricRecord[]): Abort[] => records.filter((r): r is Abort => r.type === 'abort');

/**
 * The steps aborted because something was lost (a peer, a link after a ring's first step, a
 * dissent), in order. A ring formed again after a link lost as it formed (coordinator/blame.ts
 * formAgain: nobody leaves, every member reuses its whole sum) loses nothing and is left out: it is
 * a race of link formation that a loaded machine shows now and then, not the fault a test injects.
 */
export const lossAborts = (records: readonly MetricRecord[]): number[] => abortsOf(records).filter((r) => r.formedAgain !== true).map((r) => r.step);

/** The steps whose ring formed again (see lossAborts). */
export const formedAgainSteps = (records: readonly MetricRecord[]): number[] => abortsOf(records).filter((r) => r.formedAgain === true).map((r) => r.step);

/** Every abort record, for an assertion's message. */
export const abortsText = (records: readonly MetricRecord[]): string => abortsOf(records).map((r) => JSON.stringify(r)).join('\n');

/**
 * The steps (1-based, sorted, each once) of a volunteer's log lines that `re` matches, its first
 * group being the step: a step whose attempt the coordinator aborted (a ring formed again under
 * load) is logged once more, and is still one step.
 */
export function stepsLogged(lines: readonly string[], re: RegExp): number[] {
  const steps = lines.map((l) => re.exec(l)?.[1]).filter((s): s is string => s !== undefined).map(Number);
  return [...new Set(steps)].sort((a, b) => a - b);
}
