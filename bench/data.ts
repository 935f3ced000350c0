// `npm run bench -- data`: the ImageNet data path at a small scale. The bench writes an
// ImageNet-layout folder (JPEGs of varied sizes in 100 class folders), builds it into shards
// (more shards than fit in a peer's cache), and trains the same job twice with 4 local Node
// volunteers: shard-local sampling (each epoch permutes the shards, a step draws from a window
// of them, each peer gets images of the shards it holds) and the global permutation. For each:
// the shard bytes every peer downloaded in the epochs (against the ideal, the training split's
// bytes / peers per epoch), how long steps waited for their images (prefetch hides the rest),
// and the top-1 on the whole val split after the same steps (shuffle quality).
//
//   npm run bench -- data [--classes 100] [--train-per-class 30] [--epochs 3] [--cache-shards 8] [--window 16]
//
// Writes bench/results/data.json and data.svg and prints, last,
// {"bench":"data","peers":4,"shards":..,"download_over_ideal":..,"global_download_over_ideal":..,
//  "stall_fraction":..,"top1_shard_local":..,"top1_global":..}
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Args } from '../src/cli/args.ts';
import { buildShards } from '../coordinator/data/cli.ts';
import { spawnVolunteer, type LocalVolunteer } from '../coordinator/local-volunteers.ts';
import { latestPerStep, readMetrics, type MetricRecord } from '../coordinator/metrics.ts';
import { DEFAULT_SHUFFLE_WINDOW } from '../coordinator/job.ts';
import { runJob } from '../coordinator/run.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { makeImagenetFolder } from '../testbed/imagenet-fixtures.ts';
import { tempRoot } from '../testbed/jobs.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';

export const PEERS = 4;
type Mode = 'shard-local' | 'global';

export interface ModeResult {
  mode: Mode;
  steps: number;
  /** Per peer: shard bytes downloaded while training (running total at its last step). */
  fetchedBytes: number[];
  /** Per peer: downloaded / (train bytes x epochs / peers). */
  downloadOverIdeal: number[];
  /** Per peer: time its steps waited for images / its steps' time. */
  stallFraction: number[];
  top1: number | null;
  wallSeconds: number;
}

type StepRecord = Extract<MetricRecord, { type: 'step' }>;

/** Per-peer download, data waits and step time from a job's committed steps (the last record of each). */
export function peerDataFigures(steps: readonly StepRecord[]): Map<string, { fetched: number; dataMs: number; stepMs: number; steps: number }> {
  const out = new Map<string, { fetched: number; dataMs: number; stepMs: number; steps: number }>();
  for (const r of steps) {
    for (const p of r.peers) {
      const e = out.get(p.peerId) ?? { fetched: 0, dataMs: 0, stepMs: 0, steps: 0 };
      e.fetched = Math.max(e.fetched, p.fetchedBytes ?? 0);
      e.dataMs += p.dataMs ?? 0;
      e.stepMs += r.wallMs;
      e.steps += 1;
      out.set(p.peerId, e);
    }
  }
  return out;
}

async function splitBytes(dir: string, manifest: Manifest, split: 'train' | 'val'): Promise<number> {
  let n = 0;
  for (const s of manifest.splits[split].shards) n += (await stat(join(dir, s.file))).size;
  return n;
}

export async function main(argv: string[]): Promise<void> {
  const a = new Args(argv);
  const classes = a.int('classes', 100, 2);
  const trainPerClass = a.int('train-per-class', 30, 1);
  const valPerClass = a.int('val-per-class', 20, 1);
  const epochs = a.int('epochs', 3, 1);
  const batch = a.int('batch', 64, PEERS);
  const samplesPerShard = a.int('samples-per-shard', 50, 1);
  const cacheShards = a.int('cache-shards', 8, 1);
  const size = a.int('size', 64, 8);
  const window = a.int('window', DEFAULT_SHUFFLE_WINDOW, 1);
  const lr = a.num('lr', 2, (v) => v > 0, 'a positive number');
  const seed = a.int('seed', 7);
  a.rejectUnknown('npm run bench -- data [--classes 100] [--train-per-class 30] [--val-per-class 20] [--epochs 3] [--batch 64] [--size 64] '
    + '[--samples-per-shard 50] [--cache-shards 8] [--window 16] [--lr 2] [--seed 7]');
  const root = await tempRoot('data');
  const results: ModeResult[] = [];
  try {
    const src = join(root.dir, 'imagenet-src');
    process.stderr.write(`data: writing an ImageNet folder of ${classes} classes x ${trainPerClass} train + ${valPerClass} val JPEGs ...\n`);
    await makeImagenetFolder(src, { classes, trainPerClass, valPerClass, valLayout: 'folders', sizes: [24, 80], seed });
    const dataDir = join(root.dir, 'data');
    const folder = join(dataDir, 'imagenet');
    const manifest = await buildShards({ dataset: 'imagenet', src, out: folder, size, samplesPerShard, progress: false });
    const trainBytes = await splitBytes(folder, manifest, 'train');
    const shards = manifest.splits.train.shards.length;
    const shardBytes = trainBytes / shards;
    // The in-memory shard cache of each peer holds `cacheShards` shards, far fewer than the split
    // (the volunteer takes whole MiB, at least 1).
    const cacheMb = Math.max(1, Math.round((cacheShards * shardBytes * 1.1) / 2 ** 20));
    const cacheHolds = Math.floor((cacheMb * 2 ** 20) / shardBytes);
    if (cacheHolds >= shards) {
      throw new Error(`a peer's cache (${cacheMb} MiB) would hold all ${shards} shards: give more --classes or --train-per-class, or a smaller --cache-shards`);
    }
    process.stderr.write(`data: ${shards} train shards of ${samplesPerShard} images (${(trainBytes / 1e6).toFixed(2)} MB), `
      + `each peer's ${cacheMb} MiB cache holds ${cacheHolds}\n`);
    for (const mode of ['shard-local', 'global'] as const) {
      results.push(await trainOnce({ root: root.dir, dataDir, manifest, mode, epochs, batch, lr, window, seed, cacheMb, trainBytes }));
      const r = results[results.length - 1]!;
      process.stderr.write(`data: ${mode}: download/ideal ${mean(r.downloadOverIdeal).toFixed(2)}, stall ${mean(r.stallFraction).toFixed(3)}, `
        + `top-1 ${r.top1 === null ? '-' : (r.top1 * 100).toFixed(1)}% (${r.wallSeconds.toFixed(0)} s)\n`);
    }
    const local = results[0]!;
    const global = results[1]!;
    const r3 = (x: number) => +x.toFixed(3);
    const summary = {
      bench: 'data', peers: PEERS, shards, epochs, batch, cache_shards: cacheHolds, window,
      download_over_ideal: r3(mean(local.downloadOverIdeal)),
      global_download_over_ideal: r3(mean(global.downloadOverIdeal)),
      stall_fraction: r3(mean(local.stallFraction)),
      global_stall_fraction: r3(mean(global.stallFraction)),
      top1_shard_local: local.top1 === null ? null : +(local.top1 * 100).toFixed(2),
      top1_global: global.top1 === null ? null : +(global.top1 * 100).toFixed(2),
      val_images: manifest.splits.val.samples,
    };
    const here = new URL('.', import.meta.url).pathname;
    writeFileEnsuringDir(join(here, 'results', 'data.json'), `${JSON.stringify({
      summary, runs: results, setup: { classes, trainPerClass, valPerClass, samplesPerShard, trainBytes, cacheMb },
    }, null, 2)}\n`);
    writeFileEnsuringDir(join(here, 'results', 'data.svg'), barChartSvg({
      title: `Shard bytes downloaded per peer over the ideal (${PEERS} peers, ${shards} shards, cache ${cacheHolds})`,
      yLabel: 'downloaded / (data set / peers) per epoch',
      categories: results[0]!.downloadOverIdeal.map((_, i) => `peer ${i + 1}`),
      series: results.map((r) => ({ name: r.mode, values: r.downloadOverIdeal })),
    }));
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await root.remove();
  }
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : 0);

interface TrainSpec {
  root: string; dataDir: string; manifest: Manifest; mode: Mode; epochs: number; batch: number; lr: number;
  window: number; seed: number; cacheMb: number; trainBytes: number;
}

async function trainOnce(t: TrainSpec): Promise<ModeResult> {
  const started = Date.now();
  const jobDir = join(t.root, `job-${t.mode}`);
  const job = await runJob({
    jobDir, dataDir: t.dataDir, manifest: t.manifest, evalSamples: t.manifest.splits.val.samples, finalEvalSamples: t.manifest.splits.val.samples,
    config: {
      name: `data-${t.mode}`, model: 'small-cnn', dataset: 'imagenet', globalBatch: t.batch, epochs: t.epochs,
      optimizer: { kind: 'lars', lr: t.lr, warmupSteps: Math.max(1, Math.floor(t.manifest.splits.train.samples / t.batch / 2)) },
      evalEvery: 0, checkpointEvery: 1000, seed: t.seed, minPeers: PEERS,
      ...(t.mode === 'shard-local' ? { sampling: 'shard-local', shuffleWindow: t.window } : {}),
    },
    log: () => undefined,
  });
  const peers: LocalVolunteer[] = [];
  try {
    for (let i = 0; i < PEERS; i++) {
      peers.push(spawnVolunteer({
        url: job.url, name: `peer-${i + 1}`, args: ['--backend', 'wasm', '--threads', '1', '--no-tune', '--quiet', '--memory-cache-mb', String(t.cacheMb)],
      }));
    }
    await job.driver.finished;
    await Promise.race([Promise.all(peers.map((p) => p.exited)), new Promise((r) => setTimeout(r, 10_000))]);
  } finally {
    for (const p of peers) p.kill('SIGKILL');
    await job.close();
  }
  const records = await readMetrics(join(jobDir, 'metrics.jsonl'));
  const steps = latestPerStep(records);
  const figures = [...peerDataFigures(steps).values()];
  const ideal = (t.trainBytes * t.epochs) / PEERS;
  const lastEval = records.filter((r): r is Extract<MetricRecord, { type: 'eval' }> => r.type === 'eval').pop();
  return {
    mode: t.mode, steps: steps.length,
    fetchedBytes: figures.map((f) => f.fetched),
    downloadOverIdeal: figures.map((f) => f.fetched / ideal),
    stallFraction: figures.map((f) => (f.stepMs > 0 ? f.dataMs / f.stepMs : 0)),
    top1: lastEval ? lastEval.top1 : null,
    wallSeconds: (Date.now() - started) / 1000,
  };
}
