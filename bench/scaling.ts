// `npm run bench -- scaling [--steps N] [--batch B] [--peers 1,2,3,4] [--quick]`: how the time
// of a training step splits into compute, all-reduce and waiting as the ring grows, on the
// real system: for each N a coordinator job runs in this process (coordinator/run.ts: HTTP,
// PeerJS signaling, session sockets, job folder) and N volunteers run as child processes
// (Dawn WebGPU, node-datachannel WebRTC), all on the SAME global batch B of the small CNN on
// MNIST. The per-step figures come from the job's metrics.jsonl, the first 2 steps (warm-up,
// ring formation) left out. Then the model of bench/scaling-model.ts,
//   T(N) = B/(N c) + 2(N-1)(alpha + S/(N bw)) + o,
// is fitted to the runs and predicts 8, 64 and 1,024 peers at 1 Gb/s and 100 Mb/s for ResNet-50
// and the small CNN.
//
// On this 2-core machine all N peers share the cores (and llvmpipe's threads), so N peers
// compute no faster than one: read the communication fraction and how it grows with N, not
// the speed-up. Loopback "bandwidth" and "latency" are mostly CPU time of the WebRTC stack.
//
// Figures per N, each a median over the measured steps:
//   step         time from one committed step to the next (what throughput is made of)
//   wall         the coordinator's step time: assignment sent -> last result in
//   compute      mean over peers of computeMs: forward + backward of the slice (+ reading the
//                gradient back from the GPU when N > 1)
//   comm         mean over peers of commMs: the all-reduce from its first frame received to
//                its end (+ writing the sum back to the GPU)
//   wait         mean over peers of waitMs: result sent -> next assignment in, plus the time
//                inside the all-reduce before prev's first frame (a straggler upstream)
//   The step's critical path: computeCritical (the slowest peer's compute) + allReduce (the
//   smallest commMs of the ring: the peer that entered last waited for nobody, so its time is
//   the all-reduce itself) + overhead (the rest: update, checksum, coordinator round trip).
//   commFraction = allReduce / (computeCritical + allReduce): the share of the critical path
//   spent communicating (the headline); commFractionPerPeer = comm / (compute + comm) as peers
//   report it; commShareOfStep = allReduce / step.
// Writes bench/results/scaling.json and scaling.svg; progress goes to stderr; the last stdout
// line is {"bench":"scaling","comm_fraction_4":..,"predicted_eff_64_1g":..,...}.
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArgError, Args } from '../coordinator/args.ts';
import { buildShards } from '../coordinator/data/cli.ts';
import { spawnVolunteer, type LocalVolunteer } from '../coordinator/local-volunteers.ts';
import { latestPerStep, readMetrics, type MetricRecord } from '../coordinator/metrics.ts';
import { runJob } from '../coordinator/run.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { layoutOf } from '../src/nn/layout.ts';
import { modelByName } from '../src/nn/models.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { lineChartSvg } from './plot-lines.ts';
import { fitStepModel, predictStep, ringBytesPerPeer, scalingEfficiency, type ModelFit, type RunFigures, type StepModel } from './scaling-model.ts';
import { median } from './timing.ts';

const USAGE = `usage: npm run bench -- scaling [options]
  --steps N      steps measured per ring size, after 2 warm-up steps (default 8, --quick 3)
  --batch B      global batch, the same for every ring size (default 48)
  --peers LIST   ring sizes, comma-separated, at least one >= 2 (default 1,2,3,4)
  --quick        3 measured steps per ring size`;

const here = dirname(fileURLToPath(import.meta.url));
const WARMUP_STEPS = 2;
const MODEL = 'small-cnn';
/** MNIST images in the temporary data set (the first ones of the train split). */
const TRAIN_IMAGES = 1200;
/** One ring size may take this long, start-up included, before the run is abandoned. */
const RUN_DEADLINE_MS = 5 * 60_000;
/** After the job finished, volunteers get this long to leave on their own before SIGKILL. */
const EXIT_GRACE_MS = 20_000;

/** What the predictions assume (recorded in the JSON). */
const LINKS = [{ name: '1 Gb/s', bytesPerS: 1e9 / 8 }, { name: '100 Mb/s', bytesPerS: 1e8 / 8 }] as const;
const PREDICT_PEERS = [8, 64, 1024] as const;
const RESNET50 = {
  imagesPerSecPerPeer: 250,
  computeSource: 'assumed: a round figure for one real GPU per peer training ResNet-50 at 224x224; not measured here',
  globalBatch: 32_768,
  batchSource: 'You, Gitman, Ginsburg 2017 (LARS): ResNet-50 at B = 32K',
};
const SMALL_CNN_BATCH = { globalBatch: 8192, batchSource: 'a LARS-size batch (8K, as for AlexNet in You et al.) so that 1,024 peers still get 8 images each' };

interface PeerFigures { images: number; computeMs: number; commMs: number; waitMs: number }
interface StepRow { step: number; ring: number; wallMs: number; stepMs: number; driverImagesPerSec: number; peers: PeerFigures[] }

interface RunSummary {
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

const log = (line: string) => process.stderr.write(`${line}\n`);
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const round = (x: number, digits = 4) => Number(x.toPrecision(digits));

function parsePeers(text: string): number[] {
  const list = text.split(',').map((s) => Number(s.trim()));
  if (list.some((n) => !(Number.isInteger(n) && n >= 1 && n <= 16))) throw new ArgError(`--peers must be ring sizes 1..16 separated by commas, e.g. 1,2,3,4; got "${text}"`);
  const sizes = [...new Set(list)].sort((a, b) => a - b);
  if (!sizes.some((n) => n >= 2)) throw new ArgError(`--peers needs a ring of 2 or more peers to measure the all-reduce; got "${text}"`);
  return sizes;
}

/** The step records of a finished job, and the figures of its steps after the warm-up. */
function stepRows(records: readonly MetricRecord[]): StepRow[] {
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

function summarise(peers: number, batch: number, gradBytes: number, rows: StepRow[], aborted: number, exits: (number | null)[], runSeconds: number): RunSummary {
  const wrongRing = rows.filter((r) => r.ring !== peers);
  if (wrongRing.length) throw new Error(`N = ${peers}: steps ${wrongRing.map((r) => `${r.step} (ring ${r.ring})`).join(', ')} ran on another ring size: a peer joined late or left; rerun (or look at the volunteers' lines above)`);
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
    peers, batch, measuredSteps: rows.length, abortedSteps: aborted,
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

/** Resolves `p`, or rejects with `what` after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${ms / 1000} s ${what}`)), ms); });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

interface RunContext { root: string; dataDir: string; manifest: Manifest; batch: number; steps: number; gradBytes: number }

/** One ring size: a fresh job, N volunteers started together (minPeers N), its metrics read back. */
async function runRing(n: number, o: RunContext): Promise<RunSummary> {
  const t0 = performance.now();
  const totalSteps = o.steps + WARMUP_STEPS;
  const jobDir = join(o.root, `ring-${n}`);
  const lines: string[] = [];
  const job = await runJob({
    jobDir, dataDir: o.dataDir, manifest: o.manifest, evalSamples: 48,
    config: {
      name: `scaling-${n}`, model: MODEL, dataset: 'mnist', globalBatch: o.batch, steps: totalSteps,
      optimizer: { kind: 'lars', lr: 0.5, warmupSteps: 1 }, evalEvery: 0, checkpointEvery: 1_000_000, keepCheckpoints: 1, seed: 3, minPeers: n,
    },
    log: (l) => { lines.push(l); if (lines.length > 200) lines.shift(); },
    onEvent: (e) => {
      if (e.type === 'step') log(`  N=${n} step ${e.step}/${totalSteps}: ${e.imagesPerSec.toFixed(1)} images/s, compute ${mean(e.timings.map((t) => t.computeMs)).toFixed(0)} ms, all-reduce ${mean(e.timings.map((t) => t.commMs)).toFixed(0)} ms${e.step <= WARMUP_STEPS ? ' (warm-up)' : ''}`);
      else if (e.type === 'step-aborted') log(`  N=${n} step ${e.step} aborted: ${e.reason}`);
    },
  });
  const vs: LocalVolunteer[] = [];
  try {
    log(`scaling: N=${n}: coordinator at ${job.url}, starting ${n} volunteer${n > 1 ? 's' : ''}`);
    for (let i = 0; i < n; i++) vs.push(spawnVolunteer({ url: job.url, name: `scaling-${n}-${i}`, args: ['--no-tune', '--backend', 'webgpu'] }));
    const finished = job.driver.finished.then(() => 'finished' as const);
    const allExited = Promise.all(vs.map((v) => v.exited)).then(() => 'all volunteers exited' as const);
    try {
      const first = await within(Promise.race([finished, allExited]), RUN_DEADLINE_MS, `for N=${n} to run ${totalSteps} steps`);
      if (first !== 'finished') throw new Error(`N=${n}: every volunteer exited before the job finished`);
    } catch (e) {
      const tail = [...lines.slice(-15).map((l) => `  coordinator: ${l}`), ...vs.flatMap((v) => v.lines.slice(-8).map((l) => `  ${v.name}: ${l}`))];
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n${tail.join('\n')}`);
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
  return summarise(n, o.batch, o.gradBytes, stepRows(records), aborted, exits, (performance.now() - t0) / 1000);
}

interface Scenario { model: string; paramCount: number; gradBytes: number; imagesPerSecPerPeer: number; computeSource: string; globalBatch: number; batchSource: string }
interface Prediction {
  model: string; link: string; peers: number; stepS: number; computeS: number; commS: number; overheadS: number;
  imagesPerSec: number; efficiency: number; commFraction: number;
  /** The same with alpha = 0: the bound when only bandwidth costs (see fit.note on alpha). */
  efficiencyNoLatency: number;
}

function predict(fit: StepModel, s: Scenario, link: (typeof LINKS)[number], peers: number): Prediction {
  const m: StepModel = { ...fit, imagesPerSecPerPeer: s.imagesPerSecPerPeer, bandwidthBytesPerS: link.bytesPerS };
  const t = predictStep(m, peers, s.globalBatch, s.gradBytes);
  return {
    model: s.model, link: link.name, peers, stepS: t.totalS, computeS: t.computeS, commS: t.commS, overheadS: t.overheadS,
    imagesPerSec: s.globalBatch / t.totalS, efficiency: scalingEfficiency(m, peers, s.globalBatch, s.gradBytes), commFraction: t.commS / (t.computeS + t.commS),
    efficiencyNoLatency: scalingEfficiency({ ...m, latencyS: 0 }, peers, s.globalBatch, s.gradBytes),
  };
}

/** Stacks complete SVG charts vertically in one SVG. */
function stackSvgs(parts: string[]): string {
  const sizes = parts.map((p) => {
    const m = /<svg[^>]*\swidth="(\d+)"\s+height="(\d+)"/.exec(p);
    if (!m) throw new Error('stackSvgs: a chart without width and height');
    return { w: Number(m[1]), h: Number(m[2]) };
  });
  let y = 0;
  const body = parts.map((p, i) => {
    const g = `<g transform="translate(0 ${y})">\n${p}\n</g>`;
    y += sizes[i]!.h;
    return g;
  });
  return [`<svg xmlns="http://www.w3.org/2000/svg" width="${Math.max(...sizes.map((s) => s.w))}" height="${y}">`, ...body, '</svg>'].join('\n');
}

function plot(runs: RunSummary[], fit: ModelFit, gradBytes: number, scenarios: Scenario[]): string {
  const measured = lineChartSvg({
    title: `${MODEL}, global batch ${runs[0]!.batch}, N local peers on 2 shared cores`,
    xLabel: 'peers N', yLabel: 'ms per step',
    series: [
      { name: 'step (measured)', points: runs.map((r) => [r.peers, r.stepMs]) },
      { name: 'T(N) (fitted model)', points: runs.map((r) => [r.peers, predictStep(fit.model, r.peers, r.batch, gradBytes, 1 / r.peers).totalS * 1000]) },
      { name: 'slowest compute (measured)', points: runs.map((r) => [r.peers, r.computeCriticalMs]) },
    ],
  });
  const comm = lineChartSvg({
    title: `all-reduce of ${(gradBytes / 1e6).toFixed(2)} MB and the rest of the step, local peers`,
    xLabel: 'peers N', yLabel: 'ms per step',
    series: [
      { name: 'all-reduce (measured)', points: runs.map((r) => [r.peers, r.allReduceMs]) },
      { name: 'all-reduce (fitted model)', points: runs.map((r) => [r.peers, predictStep(fit.model, r.peers, r.batch, gradBytes).commS * 1000]) },
      { name: 'rest of the step (measured)', points: runs.map((r) => [r.peers, r.overheadMs]) },
    ],
  });
  const ns = Array.from({ length: 11 }, (_, k) => 2 ** k);
  const curve = (s: Scenario, link: (typeof LINKS)[number]): [number, number][] => ns.map((n) => [Math.log2(n), predict(fit.model, s, link, n).efficiency]);
  const predicted = lineChartSvg({
    title: 'predicted scaling efficiency, same global batch (model fitted above)',
    xLabel: 'log2 peers', yLabel: 'throughput(N) / (N throughput(1))',
    series: [
      { name: `ResNet-50, ${LINKS[0].name}`, points: curve(scenarios[0]!, LINKS[0]) },
      { name: `ResNet-50, ${LINKS[1].name}`, points: curve(scenarios[0]!, LINKS[1]) },
      { name: `${MODEL}, ${LINKS[0].name}`, points: curve(scenarios[1]!, LINKS[0]) },
    ],
  });
  return stackSvgs([measured, comm, predicted]);
}

export async function main(args: string[]): Promise<void> {
  const a = new Args(args);
  const quick = a.flag('quick');
  const steps = a.int('steps', quick ? 3 : 8, 1);
  const batch = a.int('batch', 48, 1);
  const peerList = parsePeers(a.str('peers', '1,2,3,4'));
  a.rejectUnknown(USAGE);
  if (batch > 60_000) throw new ArgError('--batch must be at most 60000 (the MNIST train split)');
  if (batch < Math.max(...peerList)) throw new ArgError(`--batch ${batch} gives some of ${Math.max(...peerList)} peers no image: use at least one image per peer`);

  const small = layoutOf(modelByName(MODEL, [1, 28, 28], 10));
  const r50 = layoutOf(modelByName('resnet50', [3, 224, 224], 1000));
  // The all-reduce moves the whole flat gradient buffer, alignment padding included.
  const gradBytes = small.paramFloats * 4;
  log(`scaling: ${MODEL} on MNIST, ${small.paramCount} parameters (${(gradBytes / 1e6).toFixed(3)} MB all-reduced), global batch ${batch}, ${steps} measured + ${WARMUP_STEPS} warm-up steps, N = ${peerList.join(', ')}`);

  const root = await mkdtemp(join(tmpdir(), 'vt-scaling-'));
  const runs: RunSummary[] = [];
  try {
    const dataDir = join(root, 'data');
    const manifest = await buildShards({ dataset: 'mnist', out: join(dataDir, 'mnist'), limit: Math.max(TRAIN_IMAGES, batch), samplesPerShard: 400, progress: false });
    for (const n of peerList) {
      const r = await runRing(n, { root, dataDir, manifest, batch, steps, gradBytes });
      log(`scaling: N=${n}: step ${r.stepMs.toFixed(0)} ms = slowest compute ${r.computeCriticalMs.toFixed(0)} + all-reduce ${r.allReduceMs.toFixed(0)} + rest ${r.overheadMs.toFixed(0)}; per peer compute ${r.computeMs.toFixed(0)}, comm ${r.commMs.toFixed(0)}, wait ${r.waitMs.toFixed(0)}; ${r.imagesPerSec.toFixed(1)} images/s; all-reduce ${(100 * r.commFraction).toFixed(1)}% of the critical path (${r.runSeconds.toFixed(0)} s)`);
      runs.push(r);
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }

  // All N peers ran on this one machine: each had 1/N of it.
  const figures: RunFigures[] = runs.map((r) => ({ peers: r.peers, batch: r.batch, gradBytes, share: 1 / r.peers, computeS: r.computeCriticalMs / 1000, commS: r.allReduceMs / 1000, stepS: r.stepMs / 1000 }));
  const fit = fitStepModel(figures);
  const m = fit.model;
  log(`scaling: fitted c = ${m.imagesPerSecPerPeer.toFixed(1)} images/s per peer, alpha = ${(m.latencyS * 1000).toFixed(2)} ms per ring step, bw = ${(m.bandwidthBytesPerS / 1e6).toFixed(1)} MB/s per link (${fit.comm}), o = ${(m.overheadS * 1000).toFixed(0)} ms per step; rms error ${(fit.rmsS * 1000).toFixed(1)} ms`);

  const scenarios: Scenario[] = [
    { model: 'resnet50', paramCount: r50.paramCount, gradBytes: r50.paramFloats * 4, ...RESNET50 },
    {
      model: MODEL, paramCount: small.paramCount, gradBytes, imagesPerSecPerPeer: m.imagesPerSecPerPeer,
      computeSource: 'fitted here: c, one peer with this 2-core machine to itself, software WebGPU (Dawn, llvmpipe), no GEMM autotune',
      ...SMALL_CNN_BATCH,
    },
  ];
  const predictions = scenarios.flatMap((s) => LINKS.flatMap((l) => PREDICT_PEERS.map((n) => predict(m, s, l, n))));
  log('scaling: predictions (alpha and o as fitted on loopback, c and B per model as stated in the JSON):');
  for (const p of predictions) {
    log(`  ${p.model.padEnd(9)} ${p.link.padEnd(8)} N=${String(p.peers).padEnd(5)} step ${p.stepS.toFixed(3)} s (compute ${p.computeS.toFixed(3)}, all-reduce ${p.commS.toFixed(3)}), ${p.imagesPerSec.toFixed(0)} images/s, efficiency ${p.efficiency.toFixed(3)} (${p.efficiencyNoLatency.toFixed(3)} with alpha = 0)`);
  }

  const find = (model: string, link: (typeof LINKS)[number], n: number) => predictions.find((p) => p.model === model && p.link === link.name && p.peers === n)!;
  const at = (n: number) => runs.find((r) => r.peers === n);
  const result = {
    bench: 'scaling',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, note: 'all peers share these cores; WebGPU in software (Dawn, llvmpipe)' },
    setup: { model: MODEL, dataset: 'mnist', trainImages: Math.max(TRAIN_IMAGES, batch), globalBatch: batch, measuredSteps: steps, warmupSteps: WARMUP_STEPS, volunteerArgs: ['--no-tune', '--backend', 'webgpu'] },
    gradient: { paramCount: small.paramCount, paramFloats: small.paramFloats, bytes: gradBytes, note: 'the all-reduce moves paramFloats (aligned) float32s' },
    definitions: {
      step: 'ms from one committed step to the next (metrics.jsonl time), median over measured steps',
      wall: "the coordinator's wallMs: assignment sent -> last result in",
      computeMs: 'per-peer computeMs, mean over the ring, median over steps (includes the gradient read-back when N > 1)',
      commMs: 'per-peer commMs (all-reduce + gradient write-back; includes waiting inside the all-reduce for the slowest peer), same averaging',
      waitMs: 'per-peer waitMs (result sent -> next assignment in), same averaging',
      computeCriticalMs: 'the slowest peer\'s computeMs of each step, median over steps',
      allReduceMs: 'the smallest commMs of each step (the last peer in waited for nobody), median over steps',
      overheadMs: 'step - computeCritical - allReduce: update, checksum, coordinator round trip',
      commFraction: 'allReduce / (computeCritical + allReduce): the critical path share (headline comm_fraction_N)',
      commFractionPerPeer: 'comm / (compute + comm) with the per-peer means',
      commShareOfStep: 'allReduce / step',
      observedLinkMBps: '2(N-1)/N * S bytes per peer / allReduce time (1e6 bytes/s)',
      efficiency: 'throughput(N) / (N throughput(1)) at the same global batch = T(1) / (N T(N))',
    },
    runs,
    fit: {
      model: 'T(N) = B/(N c) + 2(N-1)(alpha + S/(N bw)) + o',
      method: 'each local peer had share 1/N of the machine; 1/c by least squares of computeCritical on B/(N share) through the origin; alpha, 1/bw by least squares of allReduce on [2(N-1), 2(N-1)/N S] over N >= 2 (alpha >= 0, else bandwidth alone); o the mean of step - computeCritical - allReduce',
      imagesPerSecPerPeer: m.imagesPerSecPerPeer, latencyMs: m.latencyS * 1000, bandwidthMBps: m.bandwidthBytesPerS / 1e6, overheadMs: m.overheadS * 1000,
      comm: fit.comm, residualsMs: fit.residualsS.map((s) => s * 1000), rmsMs: fit.rmsS * 1000,
      note: 'fitted on loopback with every peer on the same 2 cores, where the all-reduce is CPU-bound (node-datachannel costs ~30 ms of CPU per MB): its total CPU work, 2(N-1) S, grows like the latency column 2(N-1), so alpha absorbs CPU time that a peer with its own machine would not pay, and bw is poorly determined (with one S, the two columns cannot be told apart once the cores are shared). Predictions therefore also give efficiencyNoLatency (alpha = 0). o grows with N here (see runs[].overheadMs) though the model keeps it fixed',
    },
    predictions: {
      assumptions: {
        latencyMs: m.latencyS * 1000, overheadMs: m.overheadS * 1000,
        latencyOverheadSource: 'fitted here (loopback, per ring step and per step); a real network adds its own latency to alpha',
        links: LINKS.map((l) => ({ name: l.name, bytesPerS: l.bytesPerS })),
        scenarios,
      },
      rows: predictions,
    },
  };
  const out = join(here, 'results');
  writeFileEnsuringDir(join(out, 'scaling.json'), `${JSON.stringify(result, null, 1)}\n`);
  writeFileEnsuringDir(join(out, 'scaling.svg'), plot(runs, fit, gradBytes, scenarios));
  log(`scaling: wrote ${join(out, 'scaling.json')} and scaling.svg`);
  const headline = {
    bench: 'scaling',
    comm_fraction_4: at(4) ? round(at(4)!.commFraction) : null,
    predicted_eff_64_1g: round(find('resnet50', LINKS[0], 64).efficiency),
    predicted_eff_1024_1g: round(find('resnet50', LINKS[0], 1024).efficiency),
    predicted_eff_64_100m: round(find('resnet50', LINKS[1], 64).efficiency),
    predicted_eff_64_1g_no_latency: round(find('resnet50', LINKS[0], 64).efficiencyNoLatency),
    comm_fraction_by_n: Object.fromEntries(runs.map((r) => [r.peers, round(r.commFraction)])),
    images_per_sec_by_n: Object.fromEntries(runs.map((r) => [r.peers, round(r.imagesPerSec)])),
    fitted_alpha_ms: round(m.latencyS * 1000),
    fitted_bw_MBps: round(m.bandwidthBytesPerS / 1e6),
    fitted_overhead_ms: round(m.overheadS * 1000),
  };
  process.stdout.write(`${JSON.stringify(headline)}\n`);
}
