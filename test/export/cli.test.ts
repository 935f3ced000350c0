// npm run export on a job folder as the coordinator lays it out (job.json, checkpoints/,
// the data set's manifest): the newest checkpoint or --step, the metadata in the file, and
// every failure (damaged checkpoint, another model's checkpoint, missing job folder, missing
// step, missing --out folder) refused with one line, exit code 2, and NOTHING written.
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { InferenceSession } from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCheckpointStore } from '../../coordinator/checkpoints.ts';
import { decodeCheckpoint, encodeCheckpoint, layoutFingerprint } from '../../src/checkpoint/format.ts';
import { normalizeInto } from '../../src/data/augment.ts';
import { concatBytes } from '../../src/data/bytes.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { ExportError, type ExportErrorKind } from '../../src/export/errors.ts';
import { exportJob, jobSpec } from '../../src/export/job.ts';
import { TrainingState } from '../../src/client/state.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { Model } from '../../src/nn/model.ts';
import { modelByName } from '../../src/nn/models.ts';
import { parseOptimizerConfig } from '../../src/optim/config.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';
import { engineLogits, ortLogits, randomTrained, readOnnxHeader, relativeDifference } from './helpers.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const CLASSES = ['cat', 'dog', 'bird'];
const MANIFEST: Manifest = {
  format: 'vt-shards', version: 1, dataset: 'toy', classes: CLASSES,
  image: { channels: 3, height: 16, width: 16, encoding: 'png' },
  mean: [0.49, 0.48, 0.45], std: [0.25, 0.24, 0.26], gzip: false,
  splits: { train: { samples: 0, shards: [] }, val: { samples: 0, shards: [] } },
};

describe('npm run export', () => {
  let root: string, data: string, job: string, outDir: string;
  const spec = jobSpec('resnet20', MANIFEST);
  const layout = layoutOf(spec);
  const trained = [5, 10].map((step) => ({ step, ...randomTrained(layout, step) }));

  const checkpointFile = (step: number, weights: Float32Array, bnState: Float32Array, fingerprint = layoutFingerprint(spec.name, layout)): Uint8Array =>
    concatBytes(encodeCheckpoint({
      step, generation: 0, fingerprint, weights, bnState, optimizer: { momentum: new Float32Array(weights.length) }, metadata: { job: 'resnet20-toy' },
    }));

  /**
   * The newest checkpoint as a job really gets it: a volunteer's training state (weights on the
   * host, BN statistics read back from the engine) encodes it, the coordinator's store decodes
   * and writes it. The older one is encoded here directly.
   */
  let volunteerFile: Uint8Array;

  /** A fresh job folder with the checkpoints of steps 5 and 10. */
  const makeJob = async (name: string): Promise<string> => {
    const dir = join(root, name);
    await mkdir(join(dir, 'checkpoints'), { recursive: true });
    await writeFile(
      join(dir, 'job.json'), JSON.stringify({ jobId: 7, config: { name: 'resnet20-toy', model: 'resnet20', dataset: 'toy', globalBatch: 8, steps: 20 } }),
    );
    await writeFile(join(dir, 'checkpoints', 'step-0000000005.vtck'), checkpointFile(5, trained[0]!.weights, trained[0]!.bnState));
    const store = await openCheckpointStore(join(dir, 'checkpoints'), { keep: 5, log: () => {} });
    await store.write(decodeCheckpoint(volunteerFile, 'the upload'));
    return dir;
  };

  beforeAll(async () => {
    const engine = await WasmEngine.create();
    const model = new Model(engine, spec);
    const state = new TrainingState(model, parseOptimizerConfig({ kind: 'lars', lr: 0.5, totalSteps: 20 }));
    state.w.set(trained[1]!.weights);
    engine.write(model.params, state.w);
    engine.write(model.state, trained[1]!.bnState);
    volunteerFile = await state.toCheckpoint(10, 3, { job: 'resnet20-toy', peer: 'p1' });
    state.destroy();
    model.destroy();
    engine.destroy();
    root = await mkdtemp(join(tmpdir(), 'vt-export-'));
    data = join(root, 'data');
    await mkdir(join(data, 'toy'), { recursive: true });
    await writeFile(join(data, 'toy', 'manifest.json'), JSON.stringify(MANIFEST));
    job = await makeJob('job');
    outDir = join(root, 'out');
    await mkdir(outDir);
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  /** Expects an ExportError of `kind` whose message matches, and an empty --out folder. */
  const refused = async (o: { jobDir: string; step?: number; out?: string }, kind: ExportErrorKind, message: RegExp): Promise<void> => {
    const err = await exportJob({ dataDir: data, out: join(outDir, 'model.onnx'), ...o }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ExportError);
    expect((err as ExportError).kind).toBe(kind);
    expect((err as ExportError).message).toMatch(message);
    expect((err as ExportError).message).not.toContain('\n');
    expect(await readdir(outDir)).toEqual([]);
  };

  it('exports the newest checkpoint, and --step an older one, with the metadata a user needs', async () => {
    const engine = await WasmEngine.create();
    try {
      for (const [step, want] of [[undefined, trained[1]!], [5, trained[0]!]] as const) {
        const out = join(outDir, `model-${step ?? 'newest'}.onnx`);
        const r = await exportJob({ jobDir: job, dataDir: data, out, step });
        expect(r.step).toBe(want.step);
        const bytes = new Uint8Array(await readFile(out));
        expect(r.bytes).toBe(bytes.length);
        const { irVersion, opset, metadata } = readOnnxHeader(bytes);
        expect([irVersion, opset]).toEqual([8, 17]);
        expect(metadata.get('step')).toBe(String(want.step));
        expect(metadata.get('model')).toBe('resnet20');
        expect(JSON.parse(metadata.get('classes')!)).toEqual(CLASSES);
        expect(JSON.parse(metadata.get('normalization_mean')!)).toEqual(MANIFEST.mean);
        expect(JSON.parse(metadata.get('normalization_std')!)).toEqual(MANIFEST.std);
        expect(metadata.get('preprocessing')).toMatch(/pixel \/ 255 - normalization_mean\[c\]\) \/ normalization_std\[c\]/);
        // What the metadata tells a user to do is what our data loader does to an image.
        const img = { data: Uint8Array.from({ length: 16 * 16 * 3 }, (_, i) => (i * 37) % 256), height: 16, width: 16, channels: 3 as const };
        const loader = new Float32Array(3 * 16 * 16);
        normalizeInto(img, MANIFEST.mean, MANIFEST.std, loader, 0);
        const [mean, std] = [JSON.parse(metadata.get('normalization_mean')!) as number[], JSON.parse(metadata.get('normalization_std')!) as number[]];
        const user = Float32Array.from({ length: loader.length }, (_, i) => {
          const c = Math.floor(i / 256), p = i % 256; // NCHW plane c, pixel p of the HWC image
          return (img.data[p * 3 + c]! / 255 - mean[c]!) / std[c]!;
        });
        expect(relativeDifference(user, loader).maxAbs).toBeLessThan(1e-5);
        // The weights are that checkpoint's: ONNX Runtime agrees with our engine on them.
        const x = uniformF32(makeRng(3), 2 * 3 * 16 * 16, -2, 2);
        const session = await InferenceSession.create(out);
        const theirs = await ortLogits(session, spec, x, 2);
        await session.release();
        expect(relativeDifference(theirs, await engineLogits(engine, spec, want.weights, want.bnState, x, 2)).rel).toBeLessThanOrEqual(1e-4);
        await rm(out);
      }
    } finally {
      engine.destroy();
    }
  });

  it('refuses a damaged checkpoint, naming another step to export', async () => {
    const dir = await makeJob('damaged');
    const file = join(dir, 'checkpoints', 'step-0000000010.vtck');
    const bytes = new Uint8Array(await readFile(file));
    bytes[bytes.length - 100] ^= 0x40; // one bit of the weights
    await writeFile(file, bytes);
    await refused({ jobDir: dir }, 'bad-checkpoint', /step-0000000010\.vtck is unusable: sha256 mismatch.*--step 5/);
    await writeFile(file, bytes.subarray(0, 1000)); // cut off
    await refused({ jobDir: dir }, 'bad-checkpoint', /cut-off write/);
  });

  it("refuses another model's checkpoint (fingerprint)", async () => {
    const dir = await makeJob('wrong-model');
    const other = modelByName('small-cnn', [3, 16, 16], 3);
    const otherLayout = layoutOf(other);
    const w = new Float32Array(otherLayout.paramFloats), s = new Float32Array(otherLayout.stateFloats);
    await writeFile(join(dir, 'checkpoints', 'step-0000000012.vtck'), checkpointFile(12, w, s, layoutFingerprint(other.name, otherLayout)));
    await refused({ jobDir: dir }, 'bad-checkpoint', /is of model small-cnn:.*but the job trains resnet20:/);
  });

  it('refuses a missing job folder, a folder without job.json, a missing step, a job without checkpoints', async () => {
    await refused({ jobDir: join(root, 'nope') }, 'no-job', /there is no job folder .*nope: pass --job/);
    await refused({ jobDir: outDir }, 'no-job', /holds no job\.json/);
    await refused({ jobDir: job, step: 7 }, 'no-checkpoint', /no checkpoint of step 7 \(it has steps 10, 5\): pass one of those to --step/);
    const empty = join(root, 'empty');
    await mkdir(empty);
    await writeFile(join(empty, 'job.json'), JSON.stringify({ jobId: 1, config: { model: 'resnet20', dataset: 'toy' } }));
    await refused({ jobDir: empty }, 'no-checkpoint', /has no checkpoint yet/);
  });

  it('refuses an --out whose folder is missing, and a job whose data set is not there', async () => {
    await refused({ jobDir: job, out: join(outDir, 'missing', 'model.onnx') }, 'bad-output', /the folder of --out .* does not exist: create it/);
    const elsewhere = join(root, 'elsewhere');
    await mkdir(elsewhere);
    const err = await exportJob({ jobDir: job, dataDir: elsewhere, out: join(outDir, 'model.onnx') }).then(() => null, (e: unknown) => e);
    expect((err as ExportError).kind).toBe('no-data');
    expect(await readdir(outDir)).toEqual([]);
  });

  it('the command line: exit 2 and one line on stderr for an error, exit 0 and the file when it works', () => {
    const cli = (args: string[]) => spawnSync(
      process.execPath, ['--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'coordinator/export-cli.ts', ...args],
      { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    const bad = cli(['--job', job, '--step', '3', '--out', join(outDir, 'model.onnx'), '--data', data]);
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/^export: .*no checkpoint of step 3/);
    const out = join(outDir, 'cli.onnx');
    const good = cli(['--job', job, '--out', out, '--data', data]);
    expect(good.stderr).toBe('');
    expect(good.status).toBe(0);
    expect(good.stdout).toMatch(/wrote .*cli\.onnx .*resnet20 on toy, step 10/);
    expect(spawnSync('test', ['-s', out]).status).toBe(0);
  });
});
