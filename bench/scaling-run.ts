// The measuring half of the scaling bench (bench/scaling.ts): one ring size, one global batch,
// on the real system. A coordinator job runs in this process (coordinator/run.ts: HTTP, PeerJS
// signaling, session sockets, job folder) and N volunteers run as child processes (Dawn
// WebGPU, node-datachannel WebRTC), all training the small CNN on MNIST (the latency probe:
// the tiny CNN, bench/scaling.ts); the per-step figures
// come from the job's metrics.jsonl, the first WARMUP_STEPS steps (warm-up, ring formation) left
// out. See bench/scaling.ts for what each figure means.
import { join } from 'node:path';
import { spawnVolunteer, type LocalVolunteer } from '../coordinator/local-volunteers.ts';
import { latestPerStep, readMetrics, type MetricRecord } from '../coordinator/metrics.ts';
import { runJob } from '../coordinator/run.ts';
import type { Manifest } from '../src/data/manifest.ts';
import type { ModelName } from '../src/nn/models.ts';
import { MEASURED_JOB, type MeasuredRun } from './scaling-calibrate.ts';
import { ringBytesPerPeer } from './scaling-model.ts';
import { median } from './timing.ts';

export const WARMUP_STEPS = 2;
export const MODEL = 'small-cnn';
/** The latency probe's model: 170 parameters, a 1.5 KB gradient (one frame a ring step). */
export const PROBE_MODEL = 'tiny-cnn';
/** One ring size may take this long, start-up included, before the run is abandoned. */
const RUN_DEADLINE_MS = 5 * 60_000;
/** After the job finished, volunteers get this long to leave on their own before SIGKILL. */
const EXIT_GRACE_MS = 20_000;

const log = (line: string) => process.stderr.write(`${line}\n`);
/** The mean (NaN for none). */
export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

export interface PeerFigures { images: number; computeMs: number; commMs: number; waitMs: number }
export interface StepRow { step: number; ring: number; wallMs: number; stepMs: number; driverImagesPerSec: number; peers: PeerFigures[] }

export interface RunSummary {
  model: ModelName;
  peers: number;
  batch: number;
  measuredSteps: number;
  abortedSteps: number;
  stepMs: number;
  wallMs: number;
  imagesPerSec: number;
  driverImagesPerSec: number;
  computeMs: number;
  commMs: number;
  waitMs: number;
  computeCriticalMs: number;
  allReduceMs: number;
  overheadMs: number;
  commFraction: number;
  commFractionPerPeer: number;
  commShareOfStep: number;
  /** Images / compute seconds over every peer and measured step (peers share the cores). */
  perPeerImagesPerSec: number;
  /** N times that: what the machine computes with N peers on it. */
  machineImagesPerSec: number;
  imagesPerPeer: { min: number; max: number };
  ringBytesPerPeer: number;
  /** ringBytesPerPeer / allReduce: what the all-reduce achieved per peer (null for N = 1). */
  observedLinkMBps: number | null;
  volunteerExitCodes: (number | null)[];
  runSeconds: number;
  steps: StepRow[];
}

/** The step records of a finished job, and the figures of its steps after the warm-up. */
export function stepRows(records: readonly MetricRecord[]): StepRow[] {
  const steps = latestPerStep(records);
  const rows: StepRow[] = [];
  for (let i = 1; i < steps.length; i++) {
    const r = steps[i]!;
    if (r.step <= WARMUP_STEPS) continue;
    rows.push({
      step: r.step, ring: r.ring, wallMs: r.wallMs, stepMs: r.time - steps[i - 1]!.time, driverImagesPerSec: r.imagesPerSec,
      peers: r.peers.map((p) => ({ images: p.images, computeMs: p.computeMs, commMs: p.commMs, waitMs: p.waitMs })),
    });
  }
  return rows;
}

export function summarise(
  model: ModelName, peers: number, batch: number, gradBytes: number, rows: StepRow[], aborted: number, exits: (number | null)[], runSeconds: number,
): RunSummary {
  const wrongRing = rows.filter((r) => r.ring !== peers);
  if (wrongRing.length) {
    throw new Error(`N = ${peers}: steps ${wrongRing.map((r) => `${r.step} (ring ${r.ring})`).join(', ')} ran on another ring size: `
      + "a peer joined late or left; rerun (or look at the volunteers' lines above)");
  }
  if (rows.length === 0) throw new Error(`N = ${peers}: no step after the ${WARMUP_STEPS} warm-up steps was recorded; use --steps >= 1`);
  const med = (f: (r: StepRow) => number) => median(rows.map(f));
  const peerMean = (f: (p: PeerFigures) => number) => med((r) => mean(r.peers.map(f)));
  const stepMs = med((r) => r.stepMs);
  const computeMs = peerMean((p) => p.computeMs);
  const commMs = peerMean((p) => p.commMs);
  const computeCriticalMs = med((r) => Math.max(...r.peers.map((p) => p.computeMs)));
  const allReduceMs = med((r) => Math.min(...r.peers.map((p) => p.commMs)));
  const all = rows.flatMap((r) => r.peers);
  const perPeer = all.reduce((a, p) => a + p.images, 0) / (all.reduce((a, p) => a + p.computeMs, 0) / 1000);
  const bytes = ringBytesPerPeer(peers, gradBytes);
  return {
    model, peers, batch, measuredSteps: rows.length, abortedSteps: aborted,
    stepMs, wallMs: med((r) => r.wallMs),
    imagesPerSec: batch / (stepMs / 1000), driverImagesPerSec: med((r) => r.driverImagesPerSec),
    computeMs, commMs, waitMs: peerMean((p) => p.waitMs),
    computeCriticalMs, allReduceMs, overheadMs: stepMs - computeCriticalMs - allReduceMs,
    commFraction: allReduceMs / (computeCriticalMs + allReduceMs), commFractionPerPeer: commMs / (computeMs + commMs), commShareOfStep: allReduceMs / stepMs,
    perPeerImagesPerSec: perPeer, machineImagesPerSec: peers * perPeer,
    imagesPerPeer: { min: Math.min(...all.map((p) => p.images)), max: Math.max(...all.map((p) => p.images)) },
    ringBytesPerPeer: bytes, observedLinkMBps: peers > 1 && allReduceMs > 0 ? bytes / (allReduceMs / 1000) / 1e6 : null,
    volunteerExitCodes: exits, runSeconds, steps: rows,
  };
}

/** `e` with the last lines of the coordinator and of each volunteer, for a run that did not finish. */
export function withTails(e: unknown, coordinatorLines: readonly string[], vs: readonly Pick<LocalVolunteer, 'name' | 'lines'>[]): Error {
  const tail = [...coordinatorLines.slice(-15).map((l) => `  coordinator: ${l}`), ...vs.flatMap((v) => v.lines.slice(-8).map((l) => `  ${v.name}: ${l}`))];
  return new Error(`${e instanceof Error ? e.message : String(e)}\n${tail.join('\n')}`);
}

/** Resolves `p`, or rejects with `what` after `ms`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${ms / 1000} s ${what}`)), ms); });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One run's setting; `model` (default MODEL) with its `gradBytes`, the bytes each all-reduce
 * moves; `tag` names its job folder; `job` adds to the job's config and `volunteerArgs` to each
 * volunteer's command line (the straggler runs: bench/scaling.ts).
 */
export interface RunContext {
  root: string; dataDir: string; manifest: Manifest; batch: number; steps: number; gradBytes: number; model?: ModelName; tag?: string;
  job?: Record<string, unknown>; volunteerArgs?: readonly string[];
}

/** A run as the calibration reads it (seconds; all N peers ran on this one machine: each had 1/N of it). */
export const asMeasured = (r: RunSummary): MeasuredRun => ({
  peers: r.peers, batch: r.batch, share: 1 / r.peers, computeCriticalS: r.computeCriticalMs / 1000, computeMeanS: r.computeMs / 1000,
  allReduceS: r.allReduceMs / 1000, stepS: r.stepMs / 1000,
});

/** The job every measured run trains: `n` peers start it together, one bucket, no stealing (MEASURED_JOB). */
export const ringJobConfig = (name: string, n: number, batch: number, steps: number, model: ModelName, extra: Record<string, unknown> = {}) => ({
  name, model, dataset: 'mnist', globalBatch: batch, steps,
  optimizer: { kind: 'lars', lr: 0.5, warmupSteps: 1 }, evalEvery: 0, checkpointEvery: 1_000_000, keepCheckpoints: 1, seed: 3, minPeers: n,
  ...MEASURED_JOB, ...extra,
});

/** One ring size: a fresh job, N volunteers started together (minPeers N), its metrics read back. */
export async function runRing(n: number, o: RunContext): Promise<RunSummary> {
  const t0 = performance.now();
  const totalSteps = o.steps + WARMUP_STEPS;
  const model = o.model ?? MODEL;
  const jobDir = join(o.root, `ring-${n}-b${o.batch}-${model}${o.tag ? `-${o.tag}` : ''}`);
  const lines: string[] = [];
  const job = await runJob({
    jobDir, dataDir: o.dataDir, manifest: o.manifest, evalSamples: 48,
    config: ringJobConfig(`scaling-${n}-b${o.batch}-${model}`, n, o.batch, totalSteps, model, o.job),
    log: (l) => { lines.push(l); if (lines.length > 200) lines.shift(); },
    onEvent: (e) => {
      if (e.type === 'step') {
        log(`  N=${n} step ${e.step}/${totalSteps}: ${e.imagesPerSec.toFixed(1)} images/s, compute ${mean(e.timings.map((t) => t.computeMs)).toFixed(0)} ms, `
          + `all-reduce ${mean(e.timings.map((t) => t.commMs)).toFixed(0)} ms${e.step <= WARMUP_STEPS ? ' (warm-up)' : ''}`);
      } else if (e.type === 'step-aborted') log(`  N=${n} step ${e.step} aborted: ${e.reason}`);
    },
  });
  const vs: LocalVolunteer[] = [];
  try {
    log(`scaling: N=${n}: coordinator at ${job.url}, starting ${n} volunteer${n > 1 ? 's' : ''}`);
    for (let i = 0; i < n; i++) {
      vs.push(spawnVolunteer({ url: job.url, name: `scaling-${n}-${i}`, args: ['--no-tune', '--backend', 'webgpu', ...(o.volunteerArgs ?? [])] }));
    }
    const finished = job.driver.finished.then(() => 'finished' as const);
    const allExited = Promise.all(vs.map((v) => v.exited)).then(() => 'all volunteers exited' as const);
    try {
      const first = await within(Promise.race([finished, allExited]), RUN_DEADLINE_MS, `for N=${n} to run ${totalSteps} steps`);
      if (first !== 'finished') throw new Error(`N=${n}: every volunteer exited before the job finished`);
    } catch (e) {
      throw withTails(e, lines, vs);
    }
  } finally {
    await job.close();
    // After 'done' the volunteers leave on their own; anything still running after the grace is killed.
    const grace = setTimeout(() => { for (const v of vs) v.kill('SIGKILL'); }, EXIT_GRACE_MS);
    await Promise.all(vs.map((v) => v.exited));
    clearTimeout(grace);
  }
  const exits = await Promise.all(vs.map((v) => v.exited));
  exits.forEach((code, i) => { if (code !== 0) log(`scaling: N=${n}: volunteer ${vs[i]!.name} exited with ${code}:\n${vs[i]!.lines.slice(-10).join('\n')}`); });
  const records = await readMetrics(join(jobDir, 'metrics.jsonl'));
  const aborted = records.filter((r) => r.type === 'abort').length;
  return summarise(model, n, o.batch, o.gradBytes, stepRows(records), aborted, exits, (performance.now() - t0) / 1000);
}
