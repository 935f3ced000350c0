// npm start on an ImageNet folder, as a lab would run it: `--dataset imagenet --data DIR` on a
// generated ImageNet-layout folder (JPEGs of varied sizes), built into 64x64 shards on first
// use, then two local volunteers train AlexNet-BN and ResNet-50 for a few steps with the
// ImageNet recipe's optimiser and shard-local sampling. Every committed step's weight
// checksums agree between the two peers; the second job reuses the shards built by the first.
import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { latestPerStep, readMetrics } from '../../coordinator/metrics.ts';
import { makeImagenetFolder } from '../../testbed/imagenet-fixtures.ts';
import { tempRoot } from '../../testbed/jobs.ts';

let root: { dir: string; remove(): Promise<void> };
let src = '';
const STEPS = 2;

beforeAll(async () => {
  root = await tempRoot('imagenet-start');
  src = join(root.dir, 'ILSVRC');
  await makeImagenetFolder(src, { classes: 6, trainPerClass: 6, valPerClass: 2, valLayout: 'folders', sizes: [48, 96], seed: 3 });
});
afterAll(async () => {
  await root?.remove();
});

interface StartRun { code: number | null; out: string; err: string }

function npmStart(args: string[], timeoutMs: number): Promise<StartRun> {
  const child = spawn(
    process.execPath, ['--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'coordinator/cli.ts', 'start', ...args],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => child.once('exit', (code) => {
    clearTimeout(timer);
    resolve({ code, out, err });
  }));
}

async function trainModel(model: string, port: number): Promise<{ run: StartRun; jobDir: string }> {
  const jobDir = join(root.dir, `job-${model}`);
  const run = await npmStart([
    '--dataset', 'imagenet', '--data', src, '--size', '64', '--model', model, '--cache', join(root.dir, 'cache'), '--job-dir', jobDir,
    '--batch', '4', '--steps', String(STEPS), '--volunteers', '2', '--min-peers', '2', '--backend', 'wasm', '--threads', '1',
    '--eval-every', '0', '--eval-samples', '4', '--final-eval-samples', '4', '--port', String(port), '--exit-when-done',
  ], 400_000);
  return { run, jobDir };
}

describe('npm start --dataset imagenet', () => {
  for (const [model, port] of [['alexnet-bn', 18471], ['resnet50', 18472]] as const) {
    it(`2 peers train ${model} at 64x64 from an ImageNet folder; their checksums agree at every step`, async () => {
      const { run, jobDir } = await trainModel(model, port);
      expect(run.code, run.err.slice(-3000)).toBe(0);
      const result = JSON.parse(run.out.trim().split('\n').pop()!) as { model: string; dataset: string; steps: number };
      expect(result).toMatchObject({ model, dataset: 'imagenet', steps: STEPS });
      const job = JSON.parse(await readFile(join(jobDir, 'job.json'), 'utf8')) as { config: Record<string, unknown> };
      expect(job.config).toMatchObject({ model, dataset: 'imagenet', sampling: 'shard-local', globalBatch: 4 });
      expect(job.config.optimizer).toMatchObject({ kind: 'lars', momentum: 0.9, weightDecay: 5e-4, eta: 0.001, biasTrust: 'global' });
      const steps = latestPerStep(await readMetrics(join(jobDir, 'metrics.jsonl')));
      expect(steps.map((s) => s.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
      for (const s of steps) {
        expect(s.peers, `step ${s.step} committed by ${s.peers.length} peer(s); the job's log:\n${run.err.slice(-3000)}`).toHaveLength(2);
        expect(s.peers[0]!.checksum).toBe(s.peers[1]!.checksum);
        expect(s.loss).not.toBeNull();
      }
    }, 420_000);
  }

  it('built the shards once: one 64x64 build in the cache, reused by the second job', async () => {
    const cache = join(root.dir, 'cache');
    const builds = (await readdir(cache)).filter((n) => n.startsWith('imagenet-64'));
    expect(builds).toHaveLength(1);
    const manifest = JSON.parse(await readFile(join(cache, builds[0]!, 'manifest.json'), 'utf8')) as { image: { height: number }; classes: string[] };
    expect(manifest.image.height).toBe(64);
    expect(manifest.classes).toHaveLength(6);
  });
});
