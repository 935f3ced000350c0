// `npm run bench -- scaling [--steps N] [--batches 48,96] [--peers 1,2,3,4] [--quick]`: how the
// time of a training step splits into compute, all-reduce and waiting as the ring grows, on the
// real system (bench/scaling-run.ts: a coordinator job in this process, N volunteers as child
// processes, the small CNN on MNIST, the SAME global batch for every N; each batch of --batches
// is measured at every N), then a simulator (bench/scaling-sim.ts, -collective.ts, -churn.ts,
// -profile.ts) calibrated on these runs and on latency probes (the same ring sizes training the
// tiny CNN, whose 1.5 KB gradient makes its all-reduce almost all per-message latency: it pins
// alpha down where the runs alone cannot tell latency from bandwidth; bench/scaling-calibrate.ts),
// its error on the runs, and its
// predictions for 64, 256 and 1,024 peers (bench/scaling-predict.ts) of the small CNN and
// ResNet-50 at 64x64 and 224x224, B = 8K and 32K, for the CURRENT system (what the code does)
// (bf16 frames, as npm start's jobs) and the PLANNED one (a tuned bucket cap, a smaller
// overhead: not built).
//
// Then the held-out runs (bench/scaling-hosts.ts): the same job with each volunteer on a host of
// its own in the network test bed, on the lan and wifi profiles, never in the fit; the simulator
// predicts each from the profile's line, the transport bench's measured link and the run's own
// compute speed, and the largest error is `held_out_error`. Every input of the predictions is
// listed with its status (measured, fitted, assumed, code: bench/scaling-table.ts).
//
// On this 2-core machine all N peers share the cores (and llvmpipe's threads), so N peers
// compute no faster than one: read the communication fraction and how it grows with N, not
// the speed-up. Loopback "bandwidth" and "latency" are mostly CPU time of the WebRTC stack.
//
// Figures per run, each a median over the measured steps:
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
// line is {"bench":"scaling","comm_fraction_4":..,"predicted_eff_64_1g":..,...}: the
// predicted_* keys describe the CURRENT system, planned_* the planned one; comm_fraction_* and
// images_per_sec_by_n are measured at the first batch of --batches.
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArgError, Args } from '../src/cli/args.ts';
import { buildShards } from '../coordinator/data/cli.ts';
import { modelByName } from '../src/nn/models.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { calibrate, validate, type CommProbe, type MeasuredRun } from './scaling-calibrate.ts';
import { scalingPlot } from './scaling-plot.ts';
import { STEAL_CHUNK_MS } from '../coordinator/tail-pool.ts';
import {
  CHURN, PREDICT_MICROBATCH_S, PREDICT_STEAL_FRACTION, PLANNED_BUCKETS, PLANNED_OVERHEAD_S,
  LAB_GPU_BUDGET, WIRE_SCALES, boundText, wireEfficiency, linkKinds, needsFor, predictAll, predictRow, scenarios, type PredictInputs, type PredictionRow,
} from './scaling-predict.ts';
import { ROOT } from '../coordinator/local-volunteers.ts';
import { predictHeldOut, runOnHosts, type HostRun } from './scaling-hosts.ts';
import { readTransport } from './scaling-inputs.ts';
import { inputTable } from './scaling-table.ts';
import { hostUpdateSeconds } from './scaling-update.ts';
import { checkCapabilities } from '../testbed/net/bed.ts';
import type { ProfileName } from '../testbed/net/profiles.ts';
import { modelProfile } from './scaling-profile.ts';
import { DEFAULT_TWO_LEVEL_FROM } from '../coordinator/two-level.ts';
import { DEFAULT_BUCKET_BYTES, DEFAULT_LAST_BUCKET_BYTES } from '../src/nn/buckets.ts';
import { MODEL, PROBE_MODEL, WARMUP_STEPS, asMeasured, runRing, type RunSummary } from './scaling-run.ts';
import { STRAGGLE_PEERS, STRAGGLE_STEP_FACTOR, meanFigures, microBatchCost, predictStraggle, straggleRuns } from './scaling-straggle.ts';

const USAGE = `usage: npm run bench -- scaling [options]
  --steps N       steps measured per run, after ${WARMUP_STEPS} warm-up steps (default 8, --quick 4)
  --batches LIST  global batches, comma-separated; every ring size runs at each (default 48,96,
                  --quick 48,96 too; two or more give a held-out prediction error)
  --peers LIST    ring sizes, comma-separated, at least one >= 2 (default 1,2,3,4)
  --probe on|off  latency probes: each ring size of 2 or more also trains the tiny CNN (a 1.5 KB
                  gradient) at the first batch, and its all-reduce times enter the link fit
                  (default on; off: the link is fitted on the runs alone, as before)
  --straggle MU   straggler runs: a ring of ${STRAGGLE_PEERS} at the largest batch, each peer slowed every step by
                  a factor 1 + X (X exponential of mean MU), without and with work stealing,
                  ${STRAGGLE_STEP_FACTOR} x --steps steps each, measured by their mean step; the
                  simulator predicts both (default 0.3; 0: skip them)
  --hosts LIST    held-out runs: the same job with each volunteer on a host of its own in the network
                  test bed (namespaces; needs root), per profile of LIST (default lan,wifi; off: none),
                  at every batch; predicted by the simulator fitted on the loopback runs alone
                  (held_out_error)
  --host-peers N  volunteers (hosts) in each held-out run (default 3)
  --quick         4 measured steps per run (about 3 minutes here with the straggler runs; the
                  default about 5)`;

const here = dirname(fileURLToPath(import.meta.url));
/** MNIST images in the temporary data set (the first ones of the train split). */
const TRAIN_IMAGES = 1200;

const log = (line: string) => process.stderr.write(`${line}\n`);
const round = (x: number, digits = 4) => Number(x.toPrecision(digits));

function parseList(flag: string, text: string, lo: number, hi: number): number[] {
  const list = text.split(',').map((s) => Number(s.trim()));
  if (list.some((n) => !(Number.isInteger(n) && n >= lo && n <= hi))) {
    throw new ArgError(`--${flag} must be integers ${lo}..${hi} separated by commas; got "${text}"`);
  }
  return [...new Set(list)].sort((a, b) => a - b);
}

export async function main(args: string[]): Promise<void> {
  const a = new Args(args);
  const quick = a.flag('quick');
  const steps = a.int('steps', quick ? 4 : 8, 1);
  const batches = parseList('batches', a.str('batches', '48,96'), 1, 60_000);
  const peerList = parseList('peers', a.str('peers', '1,2,3,4'), 1, 16);
  const probe = a.oneOf('probe', ['on', 'off'] as const, 'on') === 'on';
  const mu = a.num('straggle', 0.3, (v) => v >= 0 && v <= 10, 'a number in [0, 10]');
  const hostsArg = a.str('hosts', 'lan,wifi');
  const hostPeers = a.int('host-peers', 3, 2);
  a.rejectUnknown(USAGE);
  const hostProfiles = hostsArg === 'off' ? [] : hostsArg.split(',').map((x) => x.trim());
  for (const p of hostProfiles) if (p !== 'lan' && p !== 'wifi' && p !== 'home') throw new ArgError(`--hosts takes lan, wifi and home, or off; got "${p}"`);
  if (hostProfiles.length) await checkCapabilities();
  if (!peerList.some((n) => n >= 2)) throw new ArgError(`--peers needs a ring of 2 or more peers to measure the all-reduce; got ${peerList.join(',')}`);
  if (Math.min(...batches) < Math.max(...peerList)) {
    throw new ArgError(`--batches ${Math.min(...batches)} gives some of ${Math.max(...peerList)} peers no image: use at least one image per peer`);
  }

  const small = modelProfile(modelByName(MODEL, [1, 28, 28], 10));
  // The all-reduce moves the whole flat gradient buffer, alignment padding included.
  const gradBytes = small.gradBytes;
  log(`scaling: ${MODEL} on MNIST, ${small.paramCount} parameters (${(gradBytes / 1e6).toFixed(3)} MB all-reduced), global batches ${batches.join(', ')}, `
    + `${steps} measured + ${WARMUP_STEPS} warm-up steps, N = ${peerList.join(', ')}`);

  const root = await mkdtemp(join(tmpdir(), 'vt-scaling-'));
  const runs: RunSummary[] = [];
  const probeRuns: RunSummary[] = [];
  let straggled: [RunSummary, RunSummary] | null = null;
  const hostRuns: HostRun[] = [];
  const probeProfile = modelProfile(modelByName(PROBE_MODEL, [1, 28, 28], 10));
  try {
    const dataDir = join(root, 'data');
    const manifest = await buildShards({
      dataset: 'mnist', out: join(dataDir, 'mnist'), limit: Math.max(TRAIN_IMAGES, ...batches), samplesPerShard: 400, progress: false,
    });
    for (const batch of batches) for (const n of peerList) {
      const r = await runRing(n, { root, dataDir, manifest, batch, steps, gradBytes });
      log(`scaling: N=${n} B=${batch}: step ${r.stepMs.toFixed(0)} ms = slowest compute ${r.computeCriticalMs.toFixed(0)} + all-reduce `
        + `${r.allReduceMs.toFixed(0)} + rest ${r.overheadMs.toFixed(0)}; per peer compute ${r.computeMs.toFixed(0)}, comm ${r.commMs.toFixed(0)}, `
        + `wait ${r.waitMs.toFixed(0)}; ${r.imagesPerSec.toFixed(1)} images/s; all-reduce ${(100 * r.commFraction).toFixed(1)}% of the critical path `
        + `(${r.runSeconds.toFixed(0)} s)`);
      runs.push(r);
    }
    if (probe) for (const n of peerList.filter((k) => k >= 2)) {
      const r = await runRing(n, { root, dataDir, manifest, batch: batches[0]!, steps, gradBytes: probeProfile.gradBytes, model: PROBE_MODEL });
      log(`scaling: latency probe N=${n} (${PROBE_MODEL}, ${probeProfile.gradBytes} bytes): all-reduce ${r.allReduceMs.toFixed(1)} ms = 2(N-1) `
        + `x ${(r.allReduceMs / (2 * (n - 1))).toFixed(2)} ms (${r.runSeconds.toFixed(0)} s)`);
      probeRuns.push(r);
    }
    for (const profile of hostProfiles as ProfileName[]) for (const batch of batches) {
      const r = await runOnHosts(profile, hostPeers, { root, dataDir, manifest, batch, steps, gradBytes });
      log(`scaling: held out, ${profile}, ${hostPeers} hosts, B=${batch}: step ${r.summary.stepMs.toFixed(0)} ms = slowest compute `
        + `${r.summary.computeCriticalMs.toFixed(0)} + all-reduce ${r.summary.allReduceMs.toFixed(0)} + rest ${r.summary.overheadMs.toFixed(0)} `
        + `(${r.summary.runSeconds.toFixed(0)} s)`);
      hostRuns.push(r);
    }
    if (mu > 0) {
      straggled = await straggleRuns(mu, { root, dataDir, manifest, batch: Math.max(...batches), steps: STRAGGLE_STEP_FACTOR * steps, gradBytes });
      const [a, b] = straggled.map((r) => meanFigures(r).stepS * 1000);
      log(`scaling: stragglers (mu ${mu}) on a ring of ${STRAGGLE_PEERS}: a mean step of ${a!.toFixed(0)} ms without stealing, `
        + `${b!.toFixed(0)} ms with (${straggled[0].runSeconds.toFixed(0)} + ${straggled[1].runSeconds.toFixed(0)} s)`);
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }

  const measured: MeasuredRun[] = runs.map(asMeasured);
  const probes: CommProbe[] = probeRuns.map((r) => ({ peers: r.peers, gradBytes: probeProfile.gradBytes, allReduceS: r.allReduceMs / 1000 }));
  const cal = calibrate(measured, gradBytes, probes);
  const v = validate(measured, small, probes);
  // What the runs alone would have fitted: the split between latency and bandwidth the probes correct.
  const runsOnly = probes.length ? calibrate(measured, gradBytes) : cal;
  log(`scaling: calibrated c = ${cal.imagesPerSecPerPeer.toFixed(1)} images/s per peer, straggler mu = ${cal.stragglerMean.toFixed(3)}, `
    + `alpha = ${(cal.link.latencyS * 1000).toFixed(2)} ms per ring step, bw = ${(cal.link.bandwidthBytesPerS / 1e6).toFixed(1)} MB/s per link (${cal.comm}`
    + `${probes.length
      ? `; the runs alone: ${(runsOnly.link.latencyS * 1000).toFixed(2)} ms, ${(runsOnly.link.bandwidthBytesPerS / 1e6).toFixed(1)} MB/s`
      : ', no latency probes'}), `
    + `overhead ${(cal.overheadS * 1000).toFixed(1)} ms + ${(cal.overheadPerPeerS * 1000).toFixed(1)} ms / share`);
  runs.forEach((r, i) => log(`  N=${r.peers} B=${r.batch}: measured ${r.stepMs.toFixed(0)} ms, simulated ${(v.predictedS[i]! * 1000).toFixed(0)} ms `
    + `(one speed: ${(v.fixedSpeedPredictedS[i]! * 1000).toFixed(0)} ms)`
    + `${v.heldOutPredictedS[i] != null ? `, held out ${(v.heldOutPredictedS[i]! * 1000).toFixed(0)} ms` : ''}`));
  log(`scaling: prediction error (max relative, step time, each run's own measured speed) ${(100 * v.maxRelError).toFixed(1)}% calibrated on all runs, `
    + `${v.heldOutMaxRelError === null ? 'n/a' : `${(100 * v.heldOutMaxRelError).toFixed(1)}%`} held out by batch; `
    + `${(100 * v.fixedSpeedMaxRelError).toFixed(1)}% with one speed for all runs`);

  // The fixed cost of a micro-batch, measured apart on one engine (the ring's runs are over).
  const microBatchS = straggled ? await microBatchCost(Math.round(Math.max(...batches) / STRAGGLE_PEERS)) : 0;
  if (straggled) log(`scaling: a micro-batch costs ${(microBatchS * 1000).toFixed(1)} ms beyond its images here (WebGPU, the machine to itself)`);
  const strag = straggled ? predictStraggle(cal, small, mu, straggled, microBatchS) : null;
  if (strag) {
    log(`scaling: stragglers: measured ${(strag.measuredS[0] * 1000).toFixed(0)} / ${(strag.measuredS[1] * 1000).toFixed(0)} ms without / with stealing `
      + `(x${strag.measuredSpeedup.toFixed(3)}), simulated ${(strag.predictedS[0] * 1000).toFixed(0)} / ${(strag.predictedS[1] * 1000).toFixed(0)} ms `
      + `(x${strag.predictedSpeedup.toFixed(3)}); errors ${(100 * strag.errors[0]).toFixed(1)}% / ${(100 * strag.errors[1]).toFixed(1)}%`);
  }
  // What the predictions take beyond the calibration: the measured link, each model's host update.
  const transport = readTransport(ROOT);
  if ('missing' in transport) log(`scaling: no measured link: ${transport.missing}; the 1 Gbit/s predictions take the line's nominal rate (assumed)`);
  const r50Profile = modelProfile(modelByName('resnet50', [3, 224, 224], 1000));
  const inp: PredictInputs = {
    links: linkKinds('missing' in transport ? null : transport),
    hostUpdateS: { small: hostUpdateSeconds(small), resnet50: hostUpdateSeconds(r50Profile) },
  };
  log(`scaling: the host update (LARS + checksum) takes ${(inp.hostUpdateS!.small * 1000).toFixed(1)} ms for the small CNN, `
    + `${(inp.hostUpdateS!.resnet50 * 1000).toFixed(0)} ms for ResNet-50 here`);
  const lan = inp.links.find((l) => l.key === '1g')!;
  const heldOut = hostRuns.map((r) => predictHeldOut(cal, r, small, lan));
  for (const h of heldOut) {
    log(`  held out ${h.profile} N=${h.peers} B=${h.batch}: measured ${(h.measuredS * 1000).toFixed(0)} ms, simulated ${(h.predictedS * 1000).toFixed(0)} ms `
      + `(${(100 * h.relError).toFixed(1)}%; with one speed for all runs ${(h.fixedSpeedPredictedS * 1000).toFixed(0)} ms, `
      + `${(100 * h.fixedSpeedRelError).toFixed(1)}%; link ${(h.link.bandwidthBytesPerS / 1e6).toFixed(2)} MB/s, `
      + `${(h.link.latencyS * 1000).toFixed(2)} ms a message)`);
  }
  const heldOutError = heldOut.length ? Math.max(...heldOut.map((h) => h.relError)) : null;
  if (heldOutError !== null) log(`scaling: held_out_error ${(100 * heldOutError).toFixed(1)}% over ${heldOut.length} runs on the test bed (goal <= 15%)`);
  const rows = predictAll(cal, inp);
  const table = inputTable(cal, inp, 'missing' in transport ? transport.missing : null);
  const byStatus = (st: string) => Object.entries(table).filter(([, x]) => x.status === st).map(([k]) => k);
  log('scaling: predictions (CURRENT = the code today, job defaults: stealing where faster; STEAL = stealing every step, --steal 0.75; PLANNED = not built):');
  for (const p of rows) {
    log(`  ${p.system.padEnd(8)} ${p.scenario.padEnd(13)} B=${String(p.batch).padEnd(6)} ${p.link.padEnd(5)} N=${String(p.peers).padEnd(5)} step `
      + `${p.stepS.toFixed(3)} s (compute ${p.computeS.toFixed(3)}, exposed all-reduce ${p.exposedCommS.toFixed(3)} of ${p.allReduceS.toFixed(3)}, `
      + `${p.buckets} bucket(s), overhead ${p.overheadS.toFixed(3)}${p.steals ? ', stealing' : ''}), efficiency ${p.efficiency.toFixed(3)}, `
      + `with churn ${p.churn.efficiency.toFixed(3)}; ${p.bound}-bound`);
  }
  const find = (sys: PredictionRow['system'], scenario: string, batch: number, link: string, n: number) => {
    const r = rows.find((p) => p.system === sys && p.scenario === scenario && p.batch === batch && p.link === link && p.peers === n);
    if (!r) throw new Error(`scaling: no prediction for ${sys} ${scenario} B=${batch} ${link} N=${n}`);
    return r;
  };
  const head = (sys: PredictionRow['system'], n: number, link = '1g') => find(sys, 'resnet50-224', 32_768, link, n);
  const first = runs.filter((r) => r.batch === batches[0]);
  // The goal (0.9 at 64 peers): what the latency per message and the stragglers would have to be.
  const needs = needsFor(cal, 0.9, 64, inp);
  const fits = needs.alphaMsByStraggler
    .map((x) => `${x.straggler}: ${x.alphaMs === null ? 'none (not even at 0 ms)' : `${x.alphaMs.toFixed(2)} ms`}`).join(', ');
  log(`scaling: 0.9 at 64 peers: the largest software latency per ring message that reaches it (fitted here: ${(cal.link.latencyS * 1000).toFixed(2)} ms), `
    + `by straggler mean: ${fits}; with neither, bandwidth and overhead leave ${needs.noLatencyNoStraggler.toFixed(3)}`);
  const at = (n: number) => first.find((r) => r.peers === n);

  const result = {
    bench: 'scaling',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, note: 'all peers share these cores; WebGPU in software (Dawn, llvmpipe)' },
    setup: {
      model: MODEL, dataset: 'mnist', trainImages: Math.max(TRAIN_IMAGES, ...batches), globalBatches: batches, measuredSteps: steps, warmupSteps: WARMUP_STEPS,
      volunteerArgs: ['--no-tune', '--backend', 'webgpu'],
    },
    gradient: { paramCount: small.paramCount, bytes: gradBytes, note: 'the all-reduce moves paramFloats (aligned) float32s' },
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
      efficiency: 'throughput(N) / (sum over the N peers of each one\'s throughput alone) at the same global batch; T(1) / (N T(N)) for identical peers',
      prediction_error: 'max over the measured runs of |simulated - measured| / measured step time, the simulator calibrated on all runs and given each run\'s '
        + 'own measured per-peer speed (its mean compute: the 2 cores are shared with other work whose load drifts between runs); prediction_error_held_out: '
        + 'the same, each global batch predicted by a calibration on the other batches only; prediction_error_fixed_speed: one calibrated speed for every run; '
        + 'the headline prediction_error also takes in the straggler runs (prediction_error_calibration_runs: the ordinary runs alone)',
    },
    runs,
    probes: probeRuns,
    calibration: {
      ...cal,
      runsOnlyLink: probes.length ? runsOnly.link : null,
      method: 'bench/scaling-calibrate.ts: each local peer had share 1/N of the machine; straggler mu from slowest vs mean compute, c from mean compute, '
        + 'alpha and 1/bw by least squares of allReduce on [2(N-1), 2(N-1)/N S] over the runs '
        + `${probes.length
          ? `and the latency probes (${PROBE_MODEL}, S = ${probeProfile.gradBytes} bytes; runsOnlyLink: the runs alone)`
          : '(no latency probes: --probe off)'}, overhead o + o_peer/share >= 0 from step - slowest compute - allReduce`,
      note: 'fitted on loopback with every peer on the same 2 cores: alpha and bw are mostly CPU time of the WebRTC stack; '
        + 'the straggler mu is 2-core contention, so the predictions assume PREDICT_STRAGGLER instead',
    },
    validation: { ...v, measuredS: measured.map((r) => r.stepS) },
    heldOut: {
      runs: hostRuns.map((r, i) => ({ ...heldOut[i]!, summary: r.summary })),
      maxRelError: heldOutError,
      method: `each volunteer (and the coordinator) on a host of its own in the network test bed (testbed/net/bed.ts), ${hostPeers} hosts, `
        + 'direct links, the same job as the loopback runs; never in the calibration. Predicted by the simulator fitted on the loopback runs, '
        + "with the profile's line (a shared medium: 1/N of it per link) capped by the transport bench's measured Node link, the profile's "
        + 'one-way delay plus the fitted software latency, and the run\'s own measured compute speed',
    },
    straggle: strag ? {
      ...strag,
      note: `a ring of ${STRAGGLE_PEERS}, each volunteer with --straggle ${mu}; the second run with stealFraction ${PREDICT_STEAL_FRACTION}; `
        + `predicted with straggler mean ${mu} + the fitted contention ${cal.stragglerMean.toFixed(3)} and the speed of the run without stealing`,
    } : null,
    predictions: {
      systems: {
        current: `what the code does today (job defaults): buckets of ${DEFAULT_BUCKET_BYTES / 2 ** 20} MiB all-reduced as backward completes them, `
          + `the last (the first layers') cut at ${DEFAULT_LAST_BUCKET_BYTES / 2 ** 20} MiB, work stealing on the steps where the coordinator measured it `
          + `faster (stealFraction auto, with its probes of the other way; ${PREDICT_MICROBATCH_S * 1000} ms a micro-batch assumed), `
          + `a flat ring below ${DEFAULT_TWO_LEVEL_FROM} peers and the two-level collective (about sqrt N groups) from ${DEFAULT_TWO_LEVEL_FROM}, `
          + `a lost peer costs only its slice, bf16 frames (npm start's default wire; the measured runs send float32), `
          + `the per-step overhead fitted here (o + o_peer)`,
        steal: `current with work stealing at every step's end (npm start --steal ${PREDICT_STEAL_FRACTION}): fixed parts, `
          + `chunks of the tail to whoever claims (about ${STEAL_CHUNK_MS} ms of compute each), `
          + "final grants sized to each peer's rate in the step with the all-reduce overlapping them",
        planned: `NOT BUILT: the bucket cap chosen per model and link (the best of `
          + `${PLANNED_BUCKETS.map((b) => (b === Infinity ? 'one' : `${b / 1e6} MB`)).join(', ')}), the next assignment pipelined with the update: `
          + `overhead ${PLANNED_OVERHEAD_S * 1000} ms per step (assumed)`,
      },
      inputs: table,
      scenarios: scenarios(cal, inp).map((s) => ({
        scenario: s.key, imagesPerSecPerPeer: s.imagesPerSecPerPeer, gradBytes: s.profile.gradBytes, forwardGflops: s.profile.forwardFlops / 1e9,
        backwardShare: s.profile.backwardShare, imagenetJob: s.imagenet, microBatchImages: s.microBatchImages ?? null,
        extraOverheadPerPeerS: s.extraOverheadPerPeerS, computeSource: s.computeSource, microBatchSource: s.microBatchSource ?? null,
        overheadSource: s.overheadSource,
      })),
      links: inp.links.map((l) => ({
        ...l, latencyPerRingStepS: l.oneWayS + cal.link.latencyS, note: 'latency per ring step = one-way delay + the software latency alpha fitted here',
      })),
      churn: {
        ...CHURN,
        note: 'sessions: mean meanSessionS (leaves ~ Poisson N/M per second); detectS: loss -> next generation running; '
          + 'joinS: admission at a step boundary. Assumed, not measured',
      },
      rows,
      needsFor90At64: {
        ...needs,
        note: 'current system, ResNet-50 224x224, B = 32K, 1 Gb/s, 64 peers: for each straggler mean, the largest software latency per ring message (ms) '
          + 'at which the efficiency still reaches 0.9 (null: not even at 0 ms; capped at the fitted latency); '
          + 'noLatencyNoStraggler = the efficiency with neither',
      },
    },
  };
  const out = join(here, 'results');
  writeFileEnsuringDir(join(out, 'scaling.json'), `${JSON.stringify(result, null, 1)}\n`);
  writeFileEnsuringDir(join(out, 'scaling.svg'), scalingPlot(runs, cal, v, inp));
  log(`scaling: wrote ${join(out, 'scaling.json')} and scaling.svg`);
  const headline = {
    bench: 'scaling',
    comm_fraction_4: at(4) ? round(at(4)!.commFraction) : null,
    predicted_eff_64_1g: round(head('current', 64).efficiency),
    predicted_eff_64_1g_f32: round(wireEfficiency(cal, 'resnet50-224', 32_768, '1g', 64, inp, WIRE_SCALES.f32)),
    predicted_eff_64_1g_pages: round(head('current', 64, '1g-page').efficiency),
    predicted_eff_64_1g_pages_i8: round(wireEfficiency(cal, 'resnet50-224', 32_768, '1g-page', 64, inp, WIRE_SCALES.i8)),
    predicted_eff_64_1g_i8: round(wireEfficiency(cal, 'resnet50-224', 32_768, '1g', 64, inp, WIRE_SCALES.i8)),
    predicted_eff_64_1g_gpu16g: round(predictRow(cal, 'current', scenarios(cal, inp, LAB_GPU_BUDGET).find((x) => x.key === 'resnet50-224')!, 32_768, lan, 64)
      .efficiency),
    held_out_error: heldOutError === null ? null : round(heldOutError),
    held_out_error_fixed_speed: heldOut.length ? round(Math.max(...heldOut.map((h) => h.fixedSpeedRelError))) : null,
    held_out_runs: heldOut.map((h) => ({
      profile: h.profile, peers: h.peers, batch: h.batch, measured_ms: round(h.measuredS * 1000), predicted_ms: round(h.predictedS * 1000),
      error: round(h.relError), fixed_speed_error: round(h.fixedSpeedRelError),
    })),
    inputs_measured: byStatus('measured'),
    inputs_fitted: byStatus('fitted'),
    inputs_assumed: byStatus('assumed'),
    link_1g_MBps: round(lan.bytesPerS / 1e6),
    link_1g_status: lan.status,
    host_update_ms_resnet50: round(inp.hostUpdateS!.resnet50 * 1000),
    predicted_eff_256_1g: round(head('current', 256).efficiency),
    predicted_eff_1024_1g: round(head('current', 1024).efficiency),
    predicted_eff_64_100m: round(head('current', 64, '100m').efficiency),
    predicted_eff_64_1g_no_latency: round(head('current', 64).efficiencyNoLatency),
    predicted_eff_64_1g_no_straggler: round(head('current', 64).efficiencyNoStraggler),
    predicted_eff_64_1g_no_latency_no_straggler: round(needs.noLatencyNoStraggler),
    needed_alpha_ms_for_0_9_by_straggler: Object.fromEntries(
      needs.alphaMsByStraggler.map((x) => [String(x.straggler), x.alphaMs === null ? null : round(x.alphaMs)]),
    ),
    steal_eff_64_1g: round(head('steal', 64).efficiency),
    steal_eff_256_1g: round(head('steal', 256).efficiency),
    steal_eff_1024_1g: round(head('steal', 1024).efficiency),
    steal_eff_64_1g_no_straggler: round(head('steal', 64).efficiencyNoStraggler),
    planned_eff_64_1g: round(head('planned', 64).efficiency),
    planned_eff_256_1g: round(head('planned', 256).efficiency),
    planned_eff_1024_1g: round(head('planned', 1024).efficiency),
    planned_eff_64_1g_no_straggler: round(head('planned', 64).efficiencyNoStraggler),
    churn_eff_256_1g: round(head('current', 256).churn.efficiency),
    planned_churn_eff_256_1g: round(head('planned', 256).churn.efficiency),
    bound_256_1g: boundText(head('current', 256)),
    bound_1024_1g: boundText(head('current', 1024)),
    planned_bound_256_1g: boundText(head('planned', 256)),
    planned_bound_1024_1g: boundText(head('planned', 1024)),
    // Over every measured run: the calibration runs and the straggler runs (with and without stealing).
    prediction_error: round(Math.max(v.maxRelError, ...(strag ? strag.errors : []))),
    prediction_error_calibration_runs: round(v.maxRelError),
    steal_measured_speedup_2: strag ? round(strag.measuredSpeedup) : null,
    steal_predicted_speedup_2: strag ? round(strag.predictedSpeedup) : null,
    steal_prediction_error: strag ? round(Math.max(...strag.errors)) : null,
    prediction_error_held_out: v.heldOutMaxRelError === null ? null : round(v.heldOutMaxRelError),
    prediction_error_fixed_speed: round(v.fixedSpeedMaxRelError),
    keys: 'predicted_*, churn_*, bound_*: the CURRENT system as an ImageNet job runs it (ResNet-50: shard-local sampling so no stealing, '
      + 'micro-batches that fit a 2 GiB GPU budget, bf16 frames; _gpu16g: a 16 GiB budget; _pages: donor pages\' links; _i8: the int8 wire); held_out_error: '
      + 'the test-bed runs, not in the fit; steal_eff_*: stealing every step (--steal 0.75; the default steals where faster); '
      + 'planned_*: the PLANNED system (not built); ResNet-50 224x224, B = 32K, 1 Gb/s (lan profile) unless the key says 100m; '
      + 'steal_*_speedup_2: the straggler runs',
    comm_fraction_by_n: Object.fromEntries(first.map((r) => [r.peers, round(r.commFraction)])),
    images_per_sec_by_n: Object.fromEntries(first.map((r) => [r.peers, round(r.imagesPerSec)])),
    fitted_alpha_ms: round(cal.link.latencyS * 1000),
    fitted_alpha_ms_runs_only: probes.length ? round(runsOnly.link.latencyS * 1000) : null,
    probe_all_reduce_ms_by_n: Object.fromEntries(probeRuns.map((r) => [r.peers, round(r.allReduceMs)])),
    fitted_bw_MBps: round(cal.link.bandwidthBytesPerS / 1e6),
    fitted_overhead_ms: round((cal.overheadS + cal.overheadPerPeerS) * 1000),
    fitted_straggler: round(cal.stragglerMean),
  };
  process.stdout.write(`${JSON.stringify(headline)}\n`);
}
