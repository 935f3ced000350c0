// npm start: the coordinator for one job on the embedded data set, plus local headless
// volunteers (one by default), with a progress bar drawn from the job's live events.
import { tallyStep, tallyUtilisation, type UtilisationTally } from '../src/train/utilisation.ts';
import { rename } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { LiveEvent } from '../src/protocol/messages.ts';
import { MODEL_NAMES, type ModelName } from '../src/nn/models.ts';
import { ProgressPrinter, type ProgressState } from '../src/train/progress.ts';
import { stepsPerEpoch } from '../src/train/sampler.ts';
import { ArgError, Args } from '../src/cli/args.ts';
import { DEFAULT_CACHE_DIR } from './data/cli.ts';
import {
  DEFAULT_IMAGENET_MODEL, DEFAULT_SHUFFLE_WINDOW, defaultBatch, loadData, readDataChoice, recipeFor, scaledLr, type SamplingKind,
} from './start-data.ts';
import { AUTO_SYNC_MAX, MAX_SYNC_EVERY } from '../src/optim/outer.ts';
import { IMAGENET_RECIPES, defaultBnGroup, recipeBnGroup } from './recipes.ts';
import { spawnVolunteer, ROOT, type LocalVolunteer } from './local-volunteers.ts';
import { latestPerStep, readMetrics } from './metrics.ts';
import { readJobFile, runJob } from './run.ts';
import { assertJobFolderFree } from './job-lock.ts';
import { DEFAULT_WIRE, JobError, MAX_LABEL_SMOOTHING, parseJobConfig, wireField } from './job.ts';
import { MAX_STEAL_FRACTION } from './tail-pool.ts';
import { WIRE_FORMATS, type WireFormat } from '../src/protocol/frames.ts';
import { DEFAULT_TWO_LEVEL_FROM } from './two-level.ts';
import { randomBytes } from 'node:crypto';
import { BACKEND_PREFERENCES } from '../src/backend/engine.ts';
import { availableParallelism } from 'node:os';
import { joinUrls } from './addresses.ts';
import { checkIcePlan, parseIceList } from './ice.ts';
import { startTurnRelay } from './turn.ts';
import { DEFAULT_TLS_DIR, extraCaFile, isLoopback } from './tls.ts';

/**
 * The wire format of a job `npm start` creates: bf16 (f32's range, so no overflow to blame a peer
 * for; sync SGD on CIFAR-10 with 4 peers ended at the same top-1 as f32, docs/sync-or-rounds.md).
 * A job file without `wire` stays f32 (DEFAULT_WIRE), so stored jobs resume as they were.
 */
export const START_WIRE: WireFormat = 'bf16';
/**
 * The rounds a job `npm start --sync-every H` creates: plain averaging (outer rate 1, no outer
 * momentum) and every peer's inner momentum carried from the round's mean change (rho 0.75,
 * src/optim/outer.ts). Searched in PyTorch (bench/gpu/lowcomm_sweep.py: 4 peers, small CNN,
 * CIFAR-10 subset, 5 seeds) at H = 8: sync 63.0%, this 62.9%, DiLoCo's outer 0.7 / 0.9 with
 * each peer's own momentum 45.7% (made for rounds of hundreds of steps), with the carry
 * 18.9% (two momenta compound). A job file without these fields keeps OUTER_DEFAULTS (DiLoCo's,
 * each peer's own momentum), so stored jobs resume as they were.
 */
export const START_OUTER = { lr: 1, momentum: 0, carry: 0.75 } as const;
/**
 * --sync-every: a number of steps, or "auto"; not given, "auto" for a coordinator that listens
 * beyond loopback (a lab's or a class's network, whatever it turns out to be), else 1 (exact sync
 * SGD on one machine's volunteers).
 */
export function readSyncEvery(arg: string, host: string, wire: WireFormat): number | 'auto' {
  // The i8 wire needs every step synchronised (its error feedback): it keeps sync unless told otherwise.
  if (arg === '') return isLoopback(host) || wire === 'i8' ? 1 : 'auto';
  if (arg === 'auto') return 'auto';
  const h = Number(arg);
  if (!Number.isInteger(h) || h < 1 || h > MAX_SYNC_EVERY) {
    throw new ArgError(`--sync-every must be auto or a whole number of steps in [1, ${MAX_SYNC_EVERY}], got "${arg.slice(0, 40)}"`);
  }
  return h;
}

/** The share of members audited each step by `--verify auto` where strangers can join (the trust bench's setting: docs/trust.md). */
export const DEFAULT_VERIFY = 0.05;

/**
 * `--verify`'s share of members audited each step, and a note to print where auto turned it off: a share in [0, 1], off, or
 * auto (the default): DEFAULT_VERIFY on a job that listens beyond loopback (strangers can join it), where nothing in the job
 * rules it out (the i8 wire, rounds without the momentum carry, explicit work stealing); off on loopback (only this
 * machine's processes can join).
 */
export function readVerify(
  arg: string, job: { host: string; wire: WireFormat; syncEvery: number | 'auto'; momentumCarry: number | undefined; steal: number | 'auto' },
): { verify: number; note: string | null } {
  if (arg === 'off') return { verify: 0, note: null };
  if (arg !== 'auto') {
    const verify = Number(arg);
    if (arg.trim() === '' || !(verify >= 0 && verify <= 1)) {
      throw new ArgError(`--verify must be auto, off or a share in [0, 1] of the members audited each step, got "${arg.slice(0, 40)}"`);
    }
    return { verify, note: null };
  }
  if (isLoopback(job.host)) return { verify: 0, note: null };
  const why = job.wire === 'i8' ? 'the i8 wire (use --wire bf16 to verify)'
    : job.syncEvery !== 1 && job.momentumCarry === undefined ? 'rounds without the momentum carry (drop --momentum-carry own to verify)'
    : typeof job.steal === 'number' && job.steal > 0 ? `--steal ${job.steal} (drop it to verify)`
    : null;
  if (why) return { verify: 0, note: `donors' work is not verified: ${why}; docs/trust.md says what that leaves open` };
  return { verify: DEFAULT_VERIFY, note: null };
}

/**
 * The job `npm start` runs with no options: large-batch LARS on CIFAR-10 (docs/running.md: "The default
 * job"). Its rate and warm-up are what the converge bench's LARS search picks at B = 512 with
 * each bias at its layer's trust ratio (lr 12, two warm-up epochs: docs/lars.md), for 11 epochs (one more than the
 * search's 10: on the whole test split 80.91%, 80.64% and 80.56% against 79.78%, 80.08% and 80.11% at 10, seeds 1-3: docs/running.md);
 * LARS warms up for two epochs, at most a fifth of the job; SGD for one, at most a tenth.
 */
export const DEFAULT_JOB = { batch: 512, epochs: 11, larsLr: 12, larsWarmupEpochs: 2, sgdLr: 0.2, evalSamples: 1000 } as const;

/**
 * Warm-up steps when --warmup is not given: a recipe's epochs, at most a tenth of the job; else
 * LARS DEFAULT_JOB.larsWarmupEpochs, at most a fifth; SGD one epoch, at most a tenth.
 */
export function defaultWarmup(kind: 'lars' | 'sgd', recipeEpochs: number | null, perEpoch: number, totalSteps: number): number {
  if (recipeEpochs !== null) return Math.min(recipeEpochs * perEpoch, Math.round(totalSteps / 10));
  return kind === 'lars' ? Math.min(DEFAULT_JOB.larsWarmupEpochs * perEpoch, Math.round(totalSteps / 5)) : Math.min(perEpoch, Math.round(totalSteps / 10));
}

export const START_USAGE = `usage: npm start -- [options]
  --dataset cifar10|mnist|imagenet   cifar10 (default) and mnist are embedded (built into .cache/data
                              on first use); imagenet trains on a folder you give with --data
  --data DIR                  (imagenet) an ImageNet folder: DIR/train/<wnid>/*.JPEG and val/ as
                              val/<wnid>/*.JPEG, val/*.JPEG + LOC_val_solution.csv, or Tiny-ImageNet's
                              val/images + val_annotations.txt; built once into shards per --size in
                              the cache (resumed if interrupted, reused after); or a folder of built
                              shards (DIR/manifest.json)
  --size 64|128|224           (imagenet) pixels a side (default 64: downsampled ImageNet, the size
                              browsers train at)
  --model NAME                ${MODEL_NAMES.join(', ')}
                              (default small-cnn; ${DEFAULT_IMAGENET_MODEL} for imagenet). ImageNet recipes (LARS, poly(2),
                              momentum 0.9, weight decay 5e-4, eta 0.001):
${Object.entries(IMAGENET_RECIPES).map(([m, r]) =>
  `                                ${m}: B=${r.batch}, lr ${r.lr}, ${r.warmupEpochs} warm-up epochs, ${r.epochs} epochs (${r.source})`).join('\n')}
                              (another --batch scales the rate by sqrt(B / B_recipe))
  --batch N                   global batch B over all peers (default 512; imagenet: the recipe's)
  --steps N | --epochs E      how long (default 11 epochs: with the other defaults, CIFAR-10 to
                              about 81% top-1 in 6-10 minutes on a 2-core machine)
  --optimizer lars|sgd        (default lars)   --lr X (default 12 for LARS, 0.2 for SGD; imagenet: the recipe's)
  --lars-biases layer|global  LARS: a bias steps at its layer weight's trust ratio (default) or at
                              the global rate (imagenet recipes' default, as published)
  --sampling shard-local|global   how a step's images are drawn (default global; imagenet:
                              shard-local: each epoch permutes the shards, a step takes its images
                              from a window of shards, and each peer gets images of shards it holds)
  --shuffle-window N          shards per shuffle window of shard-local sampling (default ${DEFAULT_SHUFFLE_WINDOW})
  --sync-every H|auto         1: every step's gradient is all-reduced (exact sync SGD);
                              H > 1: rounds of H local steps per peer, then one all-reduce of the
                              weight change and an outer Nesterov step (Wi-Fi classes, home links);
                              auto: the coordinator measures the ring and picks H in 1..${AUTO_SYNC_MAX}
                              (sync while the all-reduce is cheap), changed at round boundaries
                              (default: auto with --host beyond loopback, else 1)
  --outer-lr X --outer-momentum M   the outer step of rounds (default 1 and 0: the peers'
                              mean; DiLoCo's 0.7 and 0.9 are for rounds of hundreds of steps)
  --momentum-carry R|own      with rounds: after each round every peer's inner momentum carries
                              the share R in [0, 1) of the round's mean change into the next
                              (default ${START_OUTER.carry}); own: each peer keeps its own (DiLoCo)
  --sync-warmup N             with rounds: N exact sync steps before the first round (default 0)
  --verify auto|off|F         verify untrusted donors: another member recomputes F of the slices (or rounds),
                              a majority of disagreeing audits evicts; each member's records of what it
                              sent and received are checked against its neighbours' (default auto: 0.05
                              with --host beyond loopback, else off; f32/f16/bf16 wires, rounds with the
                              momentum carry, no --steal: docs/trust.md)
  --warmup N                  warm-up steps (default: LARS two epochs, at most a fifth of the job;
                              SGD one epoch, at most a tenth; imagenet: the recipe's)
  --label-smoothing X         targets (1 - X) onehot + X / classes, X in [0, 0.5] (default 0)
  --eval-every N              evaluate every N steps (default 50)   --eval-samples N (default 1000)
  --final-eval-samples N      test images of the job's last evaluation (default: the whole test split)
  --checkpoint-every K        a checkpoint every K steps (default 25)
  --seed N                    (default 1)
  --volunteers N              local headless volunteers to start (default 1; 0: only the coordinator)
  --backend auto|webgpu|wasm  the local volunteers' compute path (default auto: each measures
                              both for a second and keeps the faster)
  --threads N                 wasm threads per local volunteer (default: the cores, up to 4,
                              with one volunteer; 1 with several)
  --micro-batch N             local volunteers compute at most N images at once (default: as many
                              as fit their memory, measured); a larger share runs in micro-batches
  --memory-mb N               engine memory each local volunteer may use (default: wasm its 4 GiB,
                              WebGPU 2 GiB, as a GPU does not say what it has)
  --min-peers N               the first ring waits for N peers (default 1)
  --two-level-from N          a ring of N peers or more all-reduces in two levels: groups of about
                              sqrt(N) by measured links, then across the groups (default 16; 0: never)
  --steal auto|off|F          work stealing: each step keeps back the last F (0 to 0.75) of every
                              peer's share and hands it out in chunks to whoever finishes first,
                              so one slow peer does not hold up the ring. auto (default): 0.75 on
                              the steps where the coordinator measured it faster (it tries both
                              ways on each ring); off (or 0): never; F: always
  --steal-chunk N             images per chunk of it (default: about 40 ms of a peer's compute, at
                              least 8, at most an eighth of a peer's share of the tail)
  --bn-group N                ghost batch norm: BN statistics over fixed groups of N images of each
                              step, so a peer can compute its share in micro-batches that fit its
                              memory (default for an ImageNet model with BN: AlexNet-BN 32, ResNet-50
                              8, at 224 pixels 4, or the largest power of two below that divides
                              --batch and gives each of --volunteers or --min-peers a group; 0: BN
                              over each peer's whole share)
  --wire f32|f16|bf16|i8      the number format of the all-reduce between peers: bf16 (default for a
                              new job: half the bytes of f32, values rounded to 16 bits on the wire,
                              sums still in float32; no loss of top-1 measured, docs/sync-or-rounds.md), f32
                              (exact, and what a job file without the field means), f16, or i8 (a quarter
                              of f32's bytes, what it drops carried into the next step: docs/transport.md)
  --host H --port P           where to listen (default 127.0.0.1:8080; --host 0.0.0.0 for a lab:
                              prints every LAN address as a join URL)
  --turn                      start a TURN relay (Debian's coturn) for peers that cannot reach each
                              other (NAT on both sides, Wi-Fi with client isolation); credentials
                              are short-lived, derived from a secret made at start
  --turn-port P               the relay's UDP/TCP port (default 3478; relayed traffic: UDP 49160-49359)
  --ice URL,...               external STUN/TURN servers (stun:HOST:PORT, turn:USER:PASS@HOST:PORT)
  --ice-secret S              the static-auth-secret of an external coturn (TURN REST credentials)
  --stun on|off               answer STUN on UDP at --port (default on)
  --tls auto|off              HTTPS whenever --host is beyond loopback (default auto: browsers on
                              other machines get WebGPU only from https:// pages); off: plain HTTP
  --cert FILE --key FILE      a real certificate for HTTPS (a public server); else a local CA
  --tls-dir DIR               the local CA and server certificate (default .cache/tls; the CA key
                              stays there, mode 0600)
  --private                   a private job: prints the join token volunteers need
  --job-dir DIR               the job folder (default .cache/jobs/<model>-<dataset>); an unfinished
                              job there with the same options is resumed from its newest checkpoint
  --fresh                     start the job over (the old folder is kept, renamed)
  --exit-when-done            exit when the job has run its steps (default: keep serving the
                              dashboard, the result and the model until Ctrl-C)
  --cache DIR                 data sets (default .cache/data)`;

/** --momentum-carry: a number in [0, 1), or 'own' (undefined: each peer keeps its own inner momentum). */
export function readCarry(text: string, flag = '--momentum-carry'): number | undefined {
  if (text === 'own') return undefined;
  const v = Number(text);
  if (text.trim() === '' || !Number.isFinite(v) || v < 0 || v >= 1) {
    throw new ArgError(`${flag} takes a number in [0, 1) (default ${START_OUTER.carry}) or 'own', got '${text}'`);
  }
  return v;
}

export async function startMain(argv: readonly string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${START_USAGE}\n`);
    return;
  }
  const started = Date.now();
  const a = new Args(argv);
  const choice = readDataChoice(a);
  const { dataset } = choice;
  const model = a.oneOf<ModelName>('model', MODEL_NAMES, dataset === 'imagenet' ? DEFAULT_IMAGENET_MODEL : 'small-cnn');
  const recipe = recipeFor(dataset, model);
  // -1: not given (the data set's default, known once its size is).
  const batchArg = a.int('batch', -1, 1);
  const kind = a.oneOf('optimizer', ['lars', 'sgd'] as const, 'lars');
  const lrArg = a.num('lr', -1, (v) => v > 0, 'a positive number');
  // The global rate throws a network's biases about at LARS's rates (docs/lars.md); the recipes keep what their papers did.
  const biasTrust = a.oneOf<'layer' | 'global'>('lars-biases', ['layer', 'global'], recipe ? 'global' : 'layer');
  const sampling = a.oneOf<SamplingKind>('sampling', ['shard-local', 'global'], dataset === 'imagenet' ? 'shard-local' : 'global');
  const shuffleWindow = a.int('shuffle-window', DEFAULT_SHUFFLE_WINDOW, 1);
  // -1: not given (defaultWarmup: by optimiser and recipe, once the job's length is known).
  const warmupArg = a.int('warmup', -1, -1);
  const syncArg = a.str('sync-every', '');
  const syncWarmup = a.int('sync-warmup', 0, 0);
  const verifyArg = a.str('verify', 'auto');
  const labelSmoothing = a.num('label-smoothing', 0, (v) => v >= 0 && v <= MAX_LABEL_SMOOTHING, `a number in [0, ${MAX_LABEL_SMOOTHING}]`);
  const outerLr = a.num('outer-lr', START_OUTER.lr, (v) => v > 0 && v <= 10, 'a number in (0, 10]');
  const outerMomentum = a.num('outer-momentum', START_OUTER.momentum, (v) => v >= 0 && v < 1, 'a number in [0, 1)');
  const momentumCarry = readCarry(a.str('momentum-carry', String(START_OUTER.carry)));
  const host = a.str('host', '127.0.0.1');
  const wire = a.oneOf<WireFormat>('wire', WIRE_FORMATS, START_WIRE);
  const syncEvery = readSyncEvery(syncArg, host, wire);
  if (syncEvery !== 1 && momentumCarry !== undefined && outerMomentum > 0) {
    process.stderr.write(`warning: an outer momentum (${outerMomentum}) and the momentum carry (${momentumCarry}) compound: `
      + "in the search at H = 8, DiLoCo's 0.7 / 0.9 with the carry fell to 19% top-1; pass --momentum-carry own or --outer-momentum 0\n");
  }
  const evalEvery = a.int('eval-every', 50);
  const evalSamples = a.int('eval-samples', DEFAULT_JOB.evalSamples);
  const finalEvalSamples = a.int('final-eval-samples', Number.MAX_SAFE_INTEGER, 1);
  const checkpointEvery = a.int('checkpoint-every', 25, 1);
  const seed = a.int('seed', 1);
  const volunteers = a.int('volunteers', 1);
  const backend = a.oneOf('backend', BACKEND_PREFERENCES, 'auto');
  const threads = a.int('threads', volunteers === 1 ? Math.min(4, availableParallelism()) : 1, 1);
  const minPeers = a.int('min-peers', 1, 1);
  const microBatch = a.int('micro-batch', 0, 1);
  const memoryMb = a.int('memory-mb', 0, 1);
  const twoLevelFrom = a.int('two-level-from', DEFAULT_TWO_LEVEL_FROM, 0);
  const stealArg = a.str('steal', 'auto');
  const stealFraction = stealArg === 'auto' ? 'auto' : stealArg === 'off' ? 0 : Number(stealArg);
  if (stealArg.trim() === '' || (typeof stealFraction === 'number' && !(stealFraction >= 0 && stealFraction <= MAX_STEAL_FRACTION))) {
    throw new ArgError(`--steal must be auto, off or a number in [0, ${MAX_STEAL_FRACTION}], got "${stealArg.slice(0, 40)}"`);
  }
  const stealChunk = a.int('steal-chunk', 0, 1);
  const { verify, note: verifyNote } = readVerify(verifyArg, { host, wire, syncEvery, momentumCarry, steal: stealFraction });
  if (verifyNote) process.stderr.write(`${verifyNote}\n`);
  // -1: not given (the recipe's, once the batch is known).
  const bnGroupArg = a.int('bn-group', -1, 0);
  const port = a.int('port', 8080);
  const isPrivate = a.flag('private');
  const turn = a.flag('turn');
  const turnPort = a.int('turn-port', 3478, 1);
  const iceArg = a.str('ice', '');
  const iceSecret = a.str('ice-secret', '');
  const stunOn = a.oneOf('stun', ['on', 'off'] as const, 'on') === 'on';
  const tlsMode = a.oneOf('tls', ['auto', 'off'] as const, 'auto');
  const certFile = a.str('cert', '');
  const keyFile = a.str('key', '');
  const tlsDir = resolve(a.str('tls-dir', DEFAULT_TLS_DIR));
  const cache = resolve(a.str('cache', DEFAULT_CACHE_DIR));
  const jobDirArg = a.str('job-dir', '');
  const fresh = a.flag('fresh');
  const exitWhenDone = a.flag('exit-when-done');
  const stepsArg = a.int('steps', 0);
  const epochs = a.int('epochs', 0);
  a.rejectUnknown(START_USAGE);
  const external = iceArg ? parseIceList(iceArg) : [];
  checkIcePlan({ external, externalSecret: iceSecret || undefined });

  // A folder named on the command line that another coordinator holds: said at once, before the data set is built or checked.
  if (jobDirArg) await assertJobFolderFree(resolve(jobDirArg));
  const { manifest, dataFolder, label } = await loadData(choice, cache);
  const jobDir = resolve(jobDirArg || join(ROOT, '.cache', 'jobs', `${model}-${label}`));
  const trainSamples = manifest.splits.train.samples;
  const batch = batchArg > 0 ? batchArg : recipe ? defaultBatch(recipe.batch, trainSamples) : DEFAULT_JOB.batch;
  if (recipe && batchArg < 0 && batch !== recipe.batch) {
    process.stderr.write(`the training split has ${trainSamples} images, too few for ${model}'s recipe batch of ${recipe.batch}: `
      + `B=${batch} (rate scaled by sqrt(B / ${recipe.batch}))\n`);
  }
  const recipeGroup = recipe ? recipeBnGroup(recipe, manifest.image.height) : undefined;
  const bnGroup = bnGroupArg >= 0 ? bnGroupArg : recipeGroup ? defaultBnGroup(recipeGroup, batch, Math.max(volunteers, minPeers)) : 0;
  const lr = lrArg > 0 ? lrArg : recipe && kind === 'lars' ? scaledLr(recipe, batch) : kind === 'lars' ? DEFAULT_JOB.larsLr : DEFAULT_JOB.sgdLr;
  const perEpoch = stepsPerEpoch(trainSamples, batch);
  const jobEpochs = epochs > 0 ? epochs : recipe ? recipe.epochs : DEFAULT_JOB.epochs;
  const length = stepsArg > 0 ? { steps: stepsArg } : { epochs: jobEpochs };
  const totalGuess = stepsArg > 0 ? stepsArg : jobEpochs * perEpoch;
  const warmup = warmupArg >= 0 ? warmupArg : defaultWarmup(kind, recipe ? recipe.warmupEpochs : null, perEpoch, totalGuess);
  const config: Record<string, unknown> = {
    name: `${model}-${label}`, model, dataset, globalBatch: batch, ...length,
    optimizer: {
      kind, lr, warmupSteps: Math.min(warmup, totalGuess - 1), ...(kind === 'lars' ? { biasTrust } : {}),
      ...(recipe ? { momentum: recipe.momentum, weightDecay: recipe.weightDecay, ...(kind === 'lars' ? { eta: recipe.eta } : {}) } : {}),
    },
    // Only a shard-local job names it: a global job's file stays as before.
    ...(sampling === 'shard-local' ? { sampling, shuffleWindow } : {}),
    evalEvery, checkpointEvery, seed, minPeers,
    // Only a job in rounds names them: a sync job's file stays as before (and resumes as before).
    ...(syncEvery !== 1 ? {
      syncEvery, outerLr, outerMomentum, ...(syncWarmup > 0 ? { syncWarmup } : {}), ...(momentumCarry !== undefined ? { momentumCarry } : {}),
    } : {}),
    ...(labelSmoothing > 0 ? { labelSmoothing } : {}),
    ...(twoLevelFrom !== DEFAULT_TWO_LEVEL_FROM ? { twoLevelFrom } : {}),
    // Only a job that does not steal "auto" (the default) names it (the job file checks --steal-chunk with --steal off).
    ...(stealFraction !== 'auto' ? { stealFraction } : {}),
    ...(stealChunk > 0 ? { stealChunk } : {}),
    ...(bnGroup > 0 ? { bnGroup } : {}),
    ...(verify > 0 ? { verify } : {}),
    ...wireField(wire),
  };
  // A finished job, or --fresh, moves the old folder aside (nothing stored is lost); not a
  // folder another coordinator is using (runJob would refuse it anyway, after the move).
  await assertJobFolderFree(jobDir);
  const existing = await readJobFile(jobDir);
  const finished = existing && (await readMetrics(join(jobDir, 'metrics.jsonl'))).some((r) => r.type === 'done');
  if (existing && (fresh || finished)) {
    const aside = `${jobDir}-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    await rename(jobDir, aside);
    process.stderr.write(`the previous job in ${jobDir} ${finished ? 'had finished' : 'is set aside (--fresh)'}: moved to ${aside}\n`);
  } else if (existing && isPrivate) {
    throw new Error('--private applies to a new job: add --fresh (the old folder is kept)');
  }
  if (isPrivate) Object.assign(config, { access: 'private', joinToken: randomBytes(18).toString('base64url') });
  const stored = await readJobFile(jobDir);
  // A new job made from these options: refused before anything is written, naming the options.
  if (!stored) {
    try {
      parseJobConfig(config, trainSamples);
    } catch (e) {
      if (e instanceof JobError) throw new ArgError(`these options make a bad job: ${e.problems.join('; ')}; change them (npm start -- --help)`);
      throw e;
    }
  }
  const jobConfig = stored ? stored.config : config;

  const state: ProgressState = { step: 0, totalSteps: totalGuess, epoch: 0, loss: null, top1: null, imagesPerSec: null, peers: 0, utilisation: null };
  // The job's compute utilisation since this process started (metrics.jsonl has every step's).
  let tally: UtilisationTally = { computeMs: 0, peerMs: 0 };
  const printer = new ProgressPrinter(process.stderr);
  let spe = 1;
  const onEvent = (e: LiveEvent) => {
    if (e.type === 'step') {
      state.step = e.step; state.epoch = e.step / spe; state.loss = e.loss; state.peers = e.peers;
      state.imagesPerSec = state.imagesPerSec === null ? e.imagesPerSec : 0.8 * state.imagesPerSec + 0.2 * e.imagesPerSec;
      if (e.wallMs !== undefined) tally = tallyStep(tally, e.timings, e.wallMs);
      state.utilisation = tallyUtilisation(tally);
      printer.update(state);
    } else if (e.type === 'eval') {
      state.top1 = e.top1;
      printer.update(state, true);
      process.stderr.write(`\n  eval @ step ${e.step}: top-1 ${(e.top1 * 100).toFixed(1)}%, top-5 ${(e.top5 * 100).toFixed(1)}%, `
        + `loss ${e.loss.toFixed(4)} on ${e.samples} test images\n`);
    } else if (e.type === 'generation') {
      state.peers = e.ring.length;
      process.stderr.write(`\n  ring generation ${e.generation}: ${e.ring.length} peer(s): `
        + `${e.peers.map((p) => `${p.name ?? p.id.slice(0, 8)} (${p.device})`).join(', ')}\n`);
    } else if (e.type === 'step-aborted') {
      process.stderr.write(`\n  step ${e.step} aborted (${e.reason}); running it again\n`);
    }
  };
  const pageDir = await buildPage(join(ROOT, 'dist'));
  const relay = turn ? await startTurnRelay({ port: turnPort, listen: host, log: (l) => process.stderr.write(`\n${l}\n`) }) : null;
  const ice = { stun: stunOn, turn: relay ? { port: relay.port, secret: relay.secret } : undefined, external, externalSecret: iceSecret || undefined };
  const job = await runJob({
    jobDir, config: stored ? undefined : jobConfig, dataDir: cache, ...(dataFolder ? { dataFolder } : {}), manifest, host, port, evalSamples, finalEvalSamples,
    onEvent, pageDir, ice, tls: { mode: tlsMode, dir: tlsDir, ...(certFile || keyFile ? { cert: certFile || undefined, key: keyFile || undefined } : {}) },
    log: (l) => process.stderr.write(`\n${l}\n`),
  }).catch(async (e: unknown) => {
    await relay?.close();
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ArgError(`port ${port} on ${host} is in use (another coordinator?): stop it or pass --port N`);
    if (code === 'EADDRNOTAVAIL') throw new ArgError(`cannot listen on ${host}: pass --host 127.0.0.1 or an address of this machine`);
    throw e;
  });
  spe = job.job.stepsPerEpoch;
  state.totalSteps = job.job.totalSteps;
  state.step = job.driver.status().step;
  const token = job.job.access.kind === 'private' ? job.job.access.joinToken : undefined;
  const urls = joinUrls(host, job.coordinator.port, job.url.startsWith('https:'));
  const shown = urls[0]!.replace(/\/$/, '');
  if (urls.length > 1) {
    process.stderr.write(`join addresses (any one that the volunteers' network reaches):\n`
      + `${urls.map((u) => `  ${u}${token ? `?token=${token}` : ''}`).join('\n')}\n`);
  }
  const ca = job.tls?.ca;
  if (ca) {
    process.stderr.write(`HTTPS with this machine's own certificate authority: ${ca.certPath}\n  SHA-256 ${ca.sha256}\n`);
    process.stderr.write(`  each device trusts it once: download ${shown}/ca.crt (also on the dashboard), `
      + 'then Chrome/Edge: Settings > Privacy and security > Security > Manage certificates > Import (as a trusted root); '
      + 'Firefox: Settings > Privacy & Security > Certificates > View Certificates > Authorities > Import; '
      + 'macOS/Safari: open it in Keychain Access, set "Always Trust"; iOS: install the profile, then Settings > General > About > Certificate Trust Settings; '
      + 'Android: Settings > Security > Install a certificate > CA. docs/networks.md: "HTTPS and WebGPU on other machines".\n');
  } else if (host !== '127.0.0.1' && host !== 'localhost' && !job.tls) {
    process.stderr.write('plain HTTP (--tls off): browsers on other machines get no WebGPU from this page\n');
  }
  if (relay) {
    process.stderr.write(`TURN relay: coturn on UDP/TCP ${relay.port} (relayed traffic on UDP ${relay.relayPorts[0]}-${relay.relayPorts[1]}); `
      + `STUN on UDP ${job.coordinator.port}\n`);
  }
  process.stderr.write(`coordinator: ${shown}  (job ${job.job.name}: ${job.job.model} on ${job.job.dataset}, B=${job.job.globalBatch}, `
    + `${job.job.totalSteps} steps, ${job.job.optimizer.kind} lr ${job.job.optimizer.lr}`
    + `${job.job.optimizer.kind === 'lars' && job.job.optimizer.biasTrust === 'layer' ? ", biases at their layer's trust ratio" : ''}`
    + `${job.job.outer.syncEvery > 1
      ? `; ${job.job.outer.auto
        ? `rounds of up to ${job.job.outer.syncEvery} local steps as the ring measures (sync auto)`
        : `rounds of ${job.job.outer.syncEvery} local steps`}, outer Nesterov lr ${job.job.outer.lr} momentum ${job.job.outer.momentum}, `
        + `${job.job.outer.carry !== undefined ? `inner momentum carried (${job.job.outer.carry})` : "each peer's own inner momentum"}`
      : ''}`
    + `${job.job.labelSmoothing > 0 ? `; label smoothing ${job.job.labelSmoothing}` : ''}`
    + `${job.job.wire !== DEFAULT_WIRE ? `; ${job.job.wire} on the wire` : ''}`
    + `${job.job.verify > 0 ? `; donors' work verified: ${+(job.job.verify * 100).toFixed(2)}% of slices recomputed, hop records checked` : ''})\n`);
  process.stderr.write(`  donate from a browser: open ${shown}/${token ? `?token=${token}` : ''}   `
    + `dashboard: ${shown}/${job.viewToken ? `?token=${job.viewToken}` : ''}#dashboard`
    + `${job.viewToken ? ' (the view token: the dashboard only, not the data or the weights)' : ''}\n`);
  process.stderr.write(`  more headless volunteers: npm run volunteer -- --url ${shown}${token ? ` --token ${token}` : ''}`
    + `${ca ? ` --ca-sha256 ${ca.sha256}` : ''}\n  job folder: ${jobDir}\n`);
  process.stderr.write(`  admin: curl -X POST -H "Authorization: Bearer $(cat ${join(jobDir, 'admin-token')})" ${shown}/api/admin/pause   `
    + '(pause|resume|join-token|schedule)\n');

  // Local volunteers reach the coordinator at https://127.0.0.1 (in its certificate) and trust its CA.
  const localEnv = ca ? { NODE_EXTRA_CA_CERTS: await extraCaFile(tlsDir, ca.pem) } : undefined;
  const locals: LocalVolunteer[] = [];
  for (let i = 0; i < volunteers; i++) {
    locals.push(spawnVolunteer({
      url: job.url.replace('0.0.0.0', '127.0.0.1'), name: `local-${i + 1}`, token, env: localEnv,
      args: ['--quiet', '--backend', backend, '--threads', String(threads), ...(microBatch > 0 ? ['--micro-batch', String(microBatch)] : []),
        ...(memoryMb > 0 ? ['--memory-mb', String(memoryMb)] : [])],
      // Dawn's notes about limits it lowered are not news to anyone running a job.
      onLine: (line) => { if (line.trim() && !/^Warning: max\w+ artificially reduced/.test(line)) process.stderr.write(`\n[local-${i + 1}] ${line}\n`); },
    }));
  }
  let stopping = false;
  const stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\n${why}: stopping the volunteers and the coordinator (the job resumes from its newest checkpoint next time)\n`);
    await closeAll();
    process.exit(130);
  };
  const closeAll = async () => {
    for (const v of locals) v.kill('SIGTERM');
    await Promise.race([Promise.all(locals.map((v) => v.exited)), new Promise((r) => setTimeout(r, 5000))]);
    for (const v of locals) v.kill('SIGKILL');
    await job.close();
    await relay?.close();
  };
  process.once('SIGINT', () => void stop('interrupted'));
  process.once('SIGTERM', () => void stop('terminated'));

  // A failure that repeats on every try (a device that cannot take its share, a model it cannot build): the job paused itself.
  // Every local volunteer stopped on an error with nobody else in the job: say what they said, not wait forever.
  const localsFailed = new Promise<string>((resolveFailed) => {
    if (locals.length === 0) return;
    void Promise.all(locals.map((v) => v.exited)).then((codes) => {
      if (codes.every((c) => c !== 0) && job.driver.status().peers === 0) {
        const said = locals.map((v, i) => `  [${v.name}] ${v.lines.filter((l) => l.trim()).slice(-1)[0] ?? `exit ${codes[i]}`}`);
        resolveFailed(`every local volunteer stopped:\n${said.join('\n')}`);
      }
    });
  });
  const halt = await Promise.race([job.driver.finished.then(() => null), job.driver.halted, localsFailed]);
  if (halt !== null) {
    process.stderr.write(`\nstopping: ${halt}\n`);
    await closeAll();
    process.stdout.write(`${JSON.stringify({ job: job.job.name, halted: halt, steps: job.driver.status().step, jobDir })}\n`);
    process.exit(1);
  }
  printer.done(state);
  await Promise.race([Promise.all(locals.map((v) => v.exited)), new Promise((r) => setTimeout(r, 10_000))]);
  for (const v of locals) v.kill('SIGKILL');
  const records = await readMetrics(join(jobDir, 'metrics.jsonl'));
  const steps = latestPerStep(records);
  const lastEval = records.filter((r) => r.type === 'eval').pop();
  const last = steps[steps.length - 1];
  const result = {
    job: job.job.name, model: job.job.model, dataset: job.job.dataset, steps: job.driver.status().step,
    loss: last?.loss === null || last === undefined ? null : +last.loss.toFixed(4), top1: lastEval?.type === 'eval' ? +lastEval.top1.toFixed(4) : null,
    testImages: lastEval?.type === 'eval' ? lastEval.samples : null, minutes: +((Date.now() - started) / 60_000).toFixed(1), jobDir,
  };
  if (!exitWhenDone) {
    // The result stays up: the dashboard (curves, predictions, confusion matrix) and the model.
    process.stderr.write(`\njob done: top-1 ${result.top1 === null ? '-' : `${(result.top1 * 100).toFixed(1)}%`} on ${result.testImages ?? 0} test images `
      + `after ${result.minutes} min\n  dashboard: ${shown}/#dashboard   `
      + `the model as ONNX: ${shown}/api/model.onnx (or npm run export -- --job ${jobDir} --out model.onnx)\n`
      + '  still serving; Ctrl-C to stop (--exit-when-done exits here)\n');
    process.stdout.write(`${JSON.stringify(result)}\n`);
    await new Promise<void>((resolveStop) => {
      const end = () => resolveStop();
      process.removeAllListeners('SIGINT');
      process.removeAllListeners('SIGTERM');
      process.once('SIGINT', end);
      process.once('SIGTERM', end);
    });
    await job.close();
    await relay?.close();
    return;
  }
  await job.close();
  await relay?.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** Builds the page (vite, about 2 s) into `outDir`; returns it. */
export async function buildPage(outDir: string): Promise<string> {
  const { build } = await import('vite');
  await build({ root: ROOT, configFile: join(ROOT, 'vite.config.ts'), logLevel: 'error', build: { outDir, emptyOutDir: true } });
  return outDir;
}
