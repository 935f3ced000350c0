// `npm run export`: a job folder's checkpoint as an ONNX file (Node). The job folder is the
// coordinator's (coordinator/run.ts): job.json ({ jobId, config: { model, dataset, ... } })
// and checkpoints/step-<step>.vtck (coordinator/checkpoints.ts). The model is rebuilt as the
// coordinator builds it: modelByName(config.model, the manifest's image size, its classes).
//
// Nothing is written unless everything checks out: the file goes to a temporary name in the
// --out folder and is renamed into place at the end; on any failure the temporary is removed.
import { randomBytes } from 'node:crypto';
import { type FileHandle, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { CheckpointError, decodeCheckpoint, layoutFingerprint, type Checkpoint } from '../checkpoint/format.ts';
import { DataError } from '../data/errors.ts';
import { MANIFEST_FILE, validateManifest, type Manifest } from '../data/manifest.ts';
import type { ModelSpec } from '../nn/graph.ts';
import { layoutOf } from '../nn/layout.ts';
import { MODEL_NAMES, type ModelName, modelByName } from '../nn/models.ts';
import { ExportError } from './errors.ts';
import { exportOnnx, INPUT_NAME, OUTPUT_NAME } from './to-onnx.ts';

export interface ExportJobOptions {
  /** The job folder (holds job.json and checkpoints/). */
  jobDir: string;
  /** The checkpoint's step; the newest when omitted. */
  step?: number;
  /** Where the .onnx file goes; its folder must exist. */
  out: string;
  /** The data sets' folder (<dataDir>/<dataset>/manifest.json), the coordinator's --cache. */
  dataDir: string;
}

export interface ExportResult {
  out: string;
  bytes: number;
  step: number;
  model: ModelName;
  dataset: string;
  input: readonly [number, number, number];
  mean: readonly number[];
  std: readonly number[];
  classes: readonly string[];
}

const CHECKPOINT_NAME = /^step-(\d{10})\.vtck$/;

interface JobInfo { model: ModelName; dataset: string; name: string }

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return false;
    throw e;
  }
}

/** The model and data set a job folder trains (from its job.json). */
export async function readJob(jobDir: string): Promise<JobInfo> {
  const file = join(jobDir, 'job.json');
  if (!(await isDirectory(jobDir))) {
    throw new ExportError('no-job', `there is no job folder ${jobDir}: `
      + 'pass --job the folder npm start printed as "job folder:" (by default .cache/jobs/<model>-<dataset>)');
  }
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw new ExportError('no-job', `${jobDir} holds no job.json, so it is not a job folder: pass --job the folder npm start printed as "job folder:"`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    throw new ExportError('no-job', `${file} is not JSON (${e.message}): restore it from the job's start options, or pass another --job`);
  }
  const config = typeof parsed === 'object' && parsed !== null ? (parsed as { config?: unknown }).config : undefined;
  const c = typeof config === 'object' && config !== null ? (config as Record<string, unknown>) : {};
  const model = c.model;
  if (typeof model !== 'string' || !(MODEL_NAMES as readonly string[]).includes(model)) {
    throw new ExportError('no-job', `${file} names no model this exporter knows (config.model ${JSON.stringify(model)}; known: ${MODEL_NAMES.join(', ')}): `
      + 'pass a job folder written by npm start');
  }
  if (typeof c.dataset !== 'string' || !/^[a-z0-9_-]+$/i.test(c.dataset)) {
    throw new ExportError('no-job', `${file} names no data set (config.dataset ${JSON.stringify(c.dataset)}): pass a job folder written by npm start`);
  }
  return { model: model as ModelName, dataset: c.dataset, name: typeof c.name === 'string' ? c.name : basename(jobDir) };
}

/** The data set's manifest: the input size, the classes and the normalisation. */
export async function readManifest(dataDir: string, dataset: string): Promise<Manifest> {
  const file = join(dataDir, dataset, MANIFEST_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw new ExportError('no-data', `${file} is missing (the export takes the input size, classes and normalisation from it): `
      + "pass --data the folder the job's data was built in (npm start's --cache, default .cache/data)");
  }
  try {
    return validateManifest(JSON.parse(text) as unknown, file);
  } catch (e) {
    if (e instanceof SyntaxError || (e instanceof DataError && e.kind === 'bad-manifest')) {
      throw new ExportError('no-data', `${file} is not a valid manifest (${e.message}): rebuild the data set (npm start builds it) or pass another --data`);
    }
    throw e;
  }
}

/** The model spec a job trains on a data set, as the coordinator builds it. */
export function jobSpec(model: ModelName, manifest: Manifest): ModelSpec {
  const { channels, height, width } = manifest.image;
  const spec = modelByName(model, [channels, height, width], manifest.classes.length);
  if (spec.input[0] !== channels || spec.input[1] !== height || spec.input[2] !== width) {
    throw new ExportError('no-data', `${model} takes ${spec.input.join('x')} inputs, but ${manifest.dataset} has ${channels}x${height}x${width} images: `
      + 'pass --data the folder of the data set this job trained on');
  }
  return spec;
}

/** Checkpoint steps of a job folder, newest first. */
export async function checkpointSteps(jobDir: string): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir(join(jobDir, 'checkpoints'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return names.flatMap((n) => {
    const m = CHECKPOINT_NAME.exec(n);
    return m ? [Number(m[1])] : [];
  }).sort((a, b) => b - a);
}

const listSteps = (steps: readonly number[]): string => (steps.length > 8 ? `${steps.slice(0, 8).join(', ')}, ...` : steps.join(', '));

/** Reads and verifies the checkpoint of `step` (the newest when undefined). */
export async function readJobCheckpoint(jobDir: string, step: number | undefined): Promise<{ checkpoint: Checkpoint; path: string }> {
  const steps = await checkpointSteps(jobDir);
  if (steps.length === 0) {
    throw new ExportError('no-checkpoint', `${jobDir} has no checkpoint yet (checkpoints/step-*.vtck): `
      + 'train the job until its first checkpoint (npm start, every --checkpoint-every steps) and export again');
  }
  const chosen = step ?? steps[0]!;
  if (!steps.includes(chosen)) {
    throw new ExportError('no-checkpoint', `${jobDir} has no checkpoint of step ${chosen} (it has steps ${listSteps(steps)}): `
      + 'pass one of those to --step, or leave --step out for the newest');
  }
  const path = join(jobDir, 'checkpoints', `step-${String(chosen).padStart(10, '0')}.vtck`);
  const others = steps.filter((s) => s !== chosen);
  const instead = others.length > 0
    ? `export another with --step ${others[0]} (this job also has ${listSteps(others)})`
    : 'this job has no other checkpoint: train it on to the next one (npm start) and export again';
  let checkpoint: Checkpoint;
  try {
    checkpoint = decodeCheckpoint(new Uint8Array(await readFile(path)), path);
  } catch (e) {
    if (!(e instanceof CheckpointError)) throw e;
    // CheckpointError's sentence ends with the coordinator's remedy (skip it); ours differs.
    throw new ExportError('bad-checkpoint', `${e.message.replace(/; it is skipped.*$/, '')}: ${instead}`);
  }
  if (checkpoint.step !== chosen) {
    throw new ExportError('bad-checkpoint', `${path} holds step ${checkpoint.step}, not ${chosen} (renamed by hand?): ${instead}`);
  }
  return { checkpoint, path };
}

/** The model's metadata_props: what a user needs to feed it and read its output. */
export function exportMetadata(o: { model: string; job: string; step: number; fingerprint: string; manifest: Manifest; spec: ModelSpec }): [string, string][] {
  const { manifest, spec } = o;
  const channels = manifest.image.channels === 3 ? 'RGB' : 'grey';
  return [
    ['model', o.model],
    ['dataset', manifest.dataset],
    ['job', o.job],
    ['step', String(o.step)],
    ['fingerprint', o.fingerprint],
    ['input', `${INPUT_NAME}: float32 NCHW [batch, ${spec.input.join(', ')}], ${channels}, normalised as in "preprocessing"`],
    ['output', `${OUTPUT_NAME}: float32 [batch, ${spec.classes}] logits (softmax for probabilities), index i is classes[i]`],
    ['preprocessing', 'x[c][y][x] = (pixel / 255 - normalization_mean[c]) / normalization_std[c], pixel in 0..255, channel planes (NCHW)'],
    ['normalization_mean', JSON.stringify(manifest.mean)],
    ['normalization_std', JSON.stringify(manifest.std)],
    ['classes', JSON.stringify(manifest.classes)],
  ];
}

/** Writes chunks to `out` atomically: a temporary file in its folder, fsync, rename. */
export async function writeFileChunksAtomic(out: string, chunks: readonly Uint8Array[]): Promise<number> {
  const dir = dirname(out);
  const tmp = join(dir, `.${basename(out)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  let bytes = 0;
  let h: FileHandle | null;
  try {
    h = await open(tmp, 'wx');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw missingOutDir(out);
    throw e;
  }
  try {
    for (const c of chunks) {
      await h.write(c);
      bytes += c.length;
    }
    await h.sync();
    await h.close();
    h = null;
    await rename(tmp, out);
  } catch (e) {
    await h?.close();
    await rm(tmp, { force: true });
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw missingOutDir(out);
    throw e;
  }
  return bytes;
}

const missingOutDir = (out: string): ExportError => new ExportError(
  'bad-output', `the folder of --out ${out} does not exist: create it (mkdir -p ${dirname(out)}) or pass another --out`,
);

/** The whole export: job folder + data manifest + checkpoint -> ONNX file. */
export async function exportJob(o: ExportJobOptions): Promise<ExportResult> {
  const out = resolve(o.out);
  if (!(await isDirectory(dirname(out)))) throw missingOutDir(out);
  if (await isDirectory(out)) throw new ExportError('bad-output', `--out ${out} is a folder: pass a file name such as ${join(out, 'model.onnx')}`);
  const jobDir = resolve(o.jobDir);
  const job = await readJob(jobDir);
  const manifest = await readManifest(resolve(o.dataDir), job.dataset);
  const spec = jobSpec(job.model, manifest);
  const layout = layoutOf(spec);
  const fingerprint = layoutFingerprint(spec.name, layout);
  const { checkpoint, path } = await readJobCheckpoint(jobDir, o.step);
  if (checkpoint.fingerprint !== fingerprint) {
    throw new ExportError('bad-checkpoint', `${path} is of model ${checkpoint.fingerprint}, but the job trains ${fingerprint} `
      + `(${job.model} on ${manifest.dataset}, ${spec.input.join('x')}, ${spec.classes} classes): `
      + 'pass the job folder this checkpoint came from, or --data with the data set it trained on');
  }
  const chunks = exportOnnx({
    spec, weights: checkpoint.weights, bnState: checkpoint.bnState,
    metadata: exportMetadata({ model: job.model, job: job.name, step: checkpoint.step, fingerprint, manifest, spec }),
    doc: `${job.model} trained on ${manifest.dataset} by volunteer-trainer (job ${job.name}), step ${checkpoint.step}`,
  });
  const bytes = await writeFileChunksAtomic(out, chunks);
  return {
    out, bytes, step: checkpoint.step, model: job.model, dataset: manifest.dataset, input: spec.input, mean: manifest.mean, std: manifest.std,
    classes: manifest.classes,
  };
}
