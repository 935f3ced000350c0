// One run of `npm run bench -- lowcomm`: a coordinator and 4 Node volunteers (wasm, 1 thread
// each) on 5 hosts of the network test bed (testbed/net/bed.ts), their LAN shaped by a link profile
// (testbed/net/profiles.ts), training the small CNN on CIFAR-10 for a fixed number of images in
// sync mode (H = 1) or in rounds (H > 1). The peers start with the data set in their shard
// cache (--cache-dir, filled by the bench), so the network carries the training's traffic only.
// Returns the evaluations and steps against training time (evaluation time taken out).
import { createHash } from 'node:crypto';
import { link, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LiveEvent } from '../src/protocol/messages.ts';
import type { WireFormat } from '../src/protocol/frames.ts';
import { cacheFolderName } from '../src/data/disk-cache.ts';
import { Testbed } from '../testbed/net/bed.ts';
import type { ProfileName } from '../testbed/net/profiles.ts';
import { startCoordinatorIn, volunteerIn } from '../testbed/net/scenario.ts';

export interface RunSpec {
  profile: ProfileName;
  /** H, or "auto": the coordinator picks it from the ring it measures (coordinator/sync-auto.ts). */
  syncEvery: number | 'auto';
  steps: number;
  globalBatch: number;
  /** How the all-reduce sends values (job wire; absent: float32). */
  wire?: WireFormat;
  /** The job's optimiser: the inner one of rounds, the only one of sync. */
  optimizer: 'sgd' | 'lars';
  lr: number;
  /** The outer step of rounds (job outerLr / outerMomentum). */
  outerLr: number;
  outerMomentum: number;
  /** The rounds' momentum carry (job momentumCarry); absent: each peer keeps its own inner momentum. */
  carry?: number;
  /** Sync steps before the first round (job syncWarmup). */
  syncWarmup: number;
  evalEvery: number;
  evalSamples: number;
  /** Test images of the evaluation after the last step (the figures the summary compares). */
  finalEvalSamples: number;
  /** Steps of the inner optimiser's linear warm-up. */
  warmupSteps: number;
  seed: number;
}

export interface RunResult {
  profile: ProfileName;
  syncEvery: number | 'auto';
  /** A run with syncEvery "auto": each H it chose, after which step. */
  choices?: { step: number; h: number }[];
  /** Per evaluation: the step, images seen, training seconds since the ring formed, top-1. */
  evals: { step: number; images: number; seconds: number; top1: number }[];
  /** Per committed step (or round): training seconds, its steps, bytes sent per image by all peers. */
  steps: { step: number; seconds: number; innerSteps: number; bytesPerImage: number }[];
  bytesPerImage: number;
  wallSeconds: number;
}

export const PEERS = 4;
/** Numbers each run's job folder: the same mode can run twice in one root (accuracy and timing, or a search). */
let runCount = 0;

/** Puts a copy (hard links) of the data set into each peer's shard cache, with the checksums it keeps. */
export async function prefillCaches(dataDir: string, dataset: string, roots: string[]): Promise<void> {
  const src = join(dataDir, dataset);
  const manifest = await readFile(join(src, 'manifest.json'));
  const shards = (await readdir(src)).filter((f) => f !== 'manifest.json' && !f.startsWith('.'));
  const sums = new Map<string, string>();
  for (const f of shards) sums.set(f, createHash('sha256').update(await readFile(join(src, f))).digest('hex'));
  for (const root of roots) {
    const folder = join(root, cacheFolderName(dataset, manifest));
    await mkdir(folder, { recursive: true });
    for (const f of shards) {
      await link(join(src, f), join(folder, f)).catch(async () => writeFile(join(folder, f), await readFile(join(src, f))));
      await writeFile(join(folder, `${f}.sha256`), sums.get(f)!);
    }
  }
}

export async function runOnce(spec: RunSpec, o: { root: string; dataDir: string; log: (l: string) => void }): Promise<RunResult> {
  const hosts = Array.from({ length: PEERS }, (_, i) => `p${i + 1}`);
  const caches = hosts.map((h) => join(o.root, `cache-${spec.profile}-${spec.syncEvery}-${h}`));
  await prefillCaches(o.dataDir, 'cifar10', caches);
  const config = {
    name: `lowcomm-${spec.profile}-h${spec.syncEvery}`, model: 'small-cnn', dataset: 'cifar10', globalBatch: spec.globalBatch, steps: spec.steps,
    optimizer: { kind: spec.optimizer, lr: spec.lr, warmupSteps: Math.min(spec.warmupSteps, spec.steps - 1) }, evalEvery: spec.evalEvery,
    checkpointEvery: 100_000, ...(spec.wire && spec.wire !== 'f32' ? { wire: spec.wire } : {}), seed: spec.seed, minPeers: PEERS,
    ...(spec.syncEvery !== 1 ? {
      syncEvery: spec.syncEvery, outerLr: spec.outerLr, outerMomentum: spec.outerMomentum, ...(spec.syncWarmup > 0 ? { syncWarmup: spec.syncWarmup } : {}),
      ...(spec.carry !== undefined ? { momentumCarry: spec.carry } : {}),
    } : {}),
  };
  const bed = await Testbed.create({ hosts: ['coord', ...hosts], profile: spec.profile });
  const t0 = Date.now();
  try {
    const coord = await startCoordinatorIn(bed, 'coord', {
      jobDir: join(o.root, `${config.name}-${++runCount}`), dataDir: o.dataDir, dataset: 'cifar10', config, port: 8080,
      evalSamples: spec.evalSamples, finalEvalSamples: spec.finalEvalSamples, heartbeatMs: 1000,
      timeouts: { stepMs: 900_000, admitMs: 300_000, evalMs: 600_000, silentMs: 120_000 },
    });
    const url = `http://${bed.host('coord').ip}:${coord.port}`;
    const peers = hosts.map((h, i) => volunteerIn(bed, h, url, ['--threads', '1', '--cache-dir', caches[i]!]));
    try {
      const gen = await coord.waitFor((e) => e.type === 'generation' && e.ring.length === PEERS, 300_000, `a ring of ${PEERS}`);
      const limit = 3_600_000;
      await Promise.race([
        coord.finished,
        new Promise((_, rej) => setTimeout(() => rej(new Error(`run ${config.name} did not finish within an hour`)), limit)),
      ]);
      return summarise(spec, coord.events, gen.at, (Date.now() - t0) / 1000);
    } finally {
      for (const p of peers) p.kill('SIGKILL');
      await coord.stop();
    }
  } finally {
    await bed.close();
  }
}

/** Training seconds of every step and evaluation: wall time since the ring formed, minus evaluations. */
export function summarise(spec: RunSpec, events: readonly { at: number; e: LiveEvent }[], start: number, wallSeconds: number): RunResult {
  const steps: RunResult['steps'] = [];
  const evals: RunResult['evals'] = [];
  const choices: { step: number; h: number }[] = [];
  let evalMs = 0;
  let lastStepAt = start;
  for (const { at, e } of events) {
    if (at < start) continue;
    if (e.type === 'step') {
      lastStepAt = at;
      steps.push({ step: e.step, seconds: (at - start - evalMs) / 1000, innerSteps: e.traffic?.innerSteps ?? 1, bytesPerImage: e.traffic?.bytesPerImage ?? 0 });
    } else if (e.type === 'eval') {
      evalMs += at - lastStepAt; // the evaluation runs right after the step it evaluates
      evals.push({ step: e.step, images: e.step * spec.globalBatch, seconds: steps.find((s) => s.step === e.step)?.seconds ?? NaN, top1: e.top1 });
    } else if (e.type === 'sync') {
      choices.push({ step: e.step, h: e.h });
    }
  }
  // Over all images: a round carries innerSteps steps' images (a sync warm-up mixes both kinds).
  const images = steps.reduce((a, s) => a + s.innerSteps, 0);
  const bytesPerImage = images ? steps.reduce((a, s) => a + s.bytesPerImage * s.innerSteps, 0) / images : 0;
  return { profile: spec.profile, syncEvery: spec.syncEvery, ...(spec.syncEvery === 'auto' ? { choices } : {}), evals, steps, bytesPerImage, wallSeconds };
}

/** Training seconds until top-1 first reached `target` (null: never). */
export function timeToTarget(r: RunResult, target: number): number | null {
  return r.evals.find((e) => e.top1 >= target)?.seconds ?? null;
}
