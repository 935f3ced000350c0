// `npm run bench -- churn [--peers 50] [--seconds S] [--steps N] [--seed K]`: endurance on
// loopback (issue 7). A real job runs in this process (coordinator/run.ts: HTTP, PeerJS
// signaling, session sockets, job folder; model tiny-cnn on MNIST) while about `peers`
// simulated volunteers (bench/churn-host.ts: the real client, real WebRTC, WasmEngine; ~10 per
// host process) join, leave and crash at random on a seeded schedule (bench/churn-run.ts) for
// a bounded time; the run ends by itself, when the job has run its steps or, at the time
// bound, after the peers present finished it (or were sent away).
//
// Checked: no step lost (every step 1..final has a committed record) or doubled (more than
// one), every checkpoint left in the job folder decodes, verifies its sha256 and holds the
// weights whose checksum the ring committed for its step; this process's memory (gc, then
// heapUsed and rss every second): start, max, end (all volunteers gone, coordinator still up)
// and the slope of heapUsed over the second half of the churn; the driver's tables at the end.
// Unless --no-baseline, the same peers, schedule and job also run WITHOUT churn (no leaves,
// no kills), once before the churn run and once after it: `goodput` is the committed images/s
// with churn over the mean of the two without (each from the ramp's end to the churn's end).
// Measured on one side only, one calm run's spread (a calm ring of 50 runs 6-29% faster or
// slower from one run to the next here) went whole into goodput; `baseline_drift` says how far
// the two baselines differ. `honest_evictions` counts peers evicted that the schedule never made
// leave or crash, in all three runs (their eviction is a false positive).
// Writes bench/results/churn.json and churn.svg; progress goes to stderr; the last stdout line
// is {"bench":"churn","peers":..,"steps":..,"lost_steps":..,...}. Exit code 1 when a step was
// lost or doubled or a checkpoint is unreadable or does not match.
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArgError, Args } from '../src/cli/args.ts';
import { bracketCalm, cpuSecondsOfStat, cpuSplit, lossSplit } from './churn-check.ts';
import { churnData, runChurn } from './churn-run.ts';
import { CHURN_DEFAULTS, CHURN_MODEL, type ChurnResult } from './churn-types.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { SpeedProbe, speedBetween } from './speed-probe.ts';
import { lineChartSvg } from './plot-lines.ts';

const USAGE = `usage: npm run bench -- churn [options]
  --peers N        volunteers present on average (default 50)
  --seconds S      how long the churn runs at most (default 170); then the peers present get
                   --grace seconds to finish the job
  --grace S        (default 40)
  --steps N        steps of the job (default 3000: about 0.04 s a step here, so the job spans
                   most of the churn's 170 s and its host kills; at 200 it ended before the
                   first kill, and 1500 took 60 s once small gradients went as few frames)
  --seed K         seeds the schedule and the job (default 1)
  --host-size N    volunteers per host process (default 10)
  --kill-every S   SIGKILL a host process every S seconds (default 20; 0: never)
  --leave-rate P   probability per second of a normal leave (default 0.5)
  --batch B        global batch (default 100)
  --spare-hosts N  host processes started before the clock (in the baselines too) and taken
                   when a kill's replacements need a new one, as the first hosts are: a
                   simulated machine is up before its volunteers come (default: one per kill
                   the schedule can make, 9; 0: every new host starts within the run)
  --no-baseline    skip the runs without churn, before and after (no goodput then)`;

const here = dirname(fileURLToPath(import.meta.url));

/** CPU seconds so far of this process and the host processes it has reaped (null off Linux). */
function cpuSoFar(): number | null {
  try {
    const c = cpuSecondsOfStat(readFileSync('/proc/self/stat', 'utf8'));
    return c ? c.own + c.children : null;
  } catch {
    return null;
  }
}
const log = (line: string) => process.stderr.write(`${line}\n`);
const r2 = (x: number) => Math.round(x * 100) / 100;
/** Rounded to 3 decimals; null stays null (figures a run could not give). */
const r3 = (x: number | null | undefined) => (x == null ? null : Math.round(x * 1000) / 1000);

/** Stacks complete SVG charts vertically in one SVG. */
function stackSvgs(parts: string[]): string {
  let y = 0;
  let width = 0;
  const body = parts.map((p) => {
    const m = /<svg[^>]*\swidth="(\d+)"\s+height="(\d+)"/.exec(p);
    if (!m) throw new Error('stackSvgs: a chart without width and height');
    const g = `<g transform="translate(0 ${y})">\n${p}\n</g>`;
    y += Number(m[2]);
    width = Math.max(width, Number(m[1]));
    return g;
  });
  return [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}">`, ...body, '</svg>'].join('\n');
}

function plot(r: ChurnResult, peers: number): string {
  const s = r.samples;
  return stackSvgs([
    lineChartSvg({
      title: `churn: ~${peers} simulated volunteers, ${r.peers.leaves} leaves, ${r.peers.hostKills} host kills (${r.peers.kills} peers)`,
      xLabel: 'seconds', yLabel: 'peers',
      series: [
        { name: 'ring size', points: s.map((x) => [x.t, x.ring]) },
        { name: 'sessions open', points: s.map((x) => [x.t, x.connected]) },
        { name: 'volunteers running', points: s.map((x) => [x.t, x.present]) },
      ],
    }),
    lineChartSvg({
      title: 'coordinator process memory (after gc)', xLabel: 'seconds', yLabel: 'MB',
      series: [
        { name: 'heapUsed', points: s.map((x) => [x.t, x.heapMb]) },
        { name: 'rss', points: s.map((x) => [x.t, x.rssMb]) },
      ],
    }),
    lineChartSvg({
      title: `committed step (${r.history.aborts} aborted attempts, ${r.evictions} evictions)`, xLabel: 'seconds', yLabel: 'step',
      series: [{ name: 'step', points: s.map((x) => [x.t, x.step]) }],
    }),
  ]);
}

export async function main(args: string[]): Promise<void> {
  const a = new Args(args);
  const peers = a.int('peers', 50, 1);
  const seconds = a.int('seconds', 170, 5);
  const grace = a.int('grace', 40, 0);
  const steps = a.int('steps', 3000, 1);
  const seed = a.int('seed', 1, 0);
  const hostSize = a.int('host-size', CHURN_DEFAULTS.hostSize, 1);
  const killEvery = a.int('kill-every', CHURN_DEFAULTS.killEverySec, 0);
  const leaveRate = a.num('leave-rate', CHURN_DEFAULTS.leavePerSec, (v) => v >= 0 && v <= 1, 'a probability in [0, 1]');
  const batch = a.int('batch', CHURN_DEFAULTS.batch, 1);
  // One spare per kill the schedule can make (a kill's replacements start on one).
  const spareHosts = a.int('spare-hosts', killEvery > 0 ? Math.ceil(seconds / killEvery) : 0, 0);
  const baseline = !a.flag('no-baseline');
  a.rejectUnknown(USAGE);
  if (batch > 1200) throw new ArgError('--batch must be at most 1200 (the churn data set has 1,200 train images)');

  const t0 = performance.now();
  const cache = resolve(here, '../.cache/bench/churn');
  const data = await churnData(join(cache, 'data'));
  const workDir = join(cache, 'run');
  await rm(workDir, { recursive: true, force: true });
  log(`churn: ${CHURN_MODEL} on MNIST, ${steps} steps of batch ${batch}, ~${peers} volunteers (${hostSize} per host process) `
    + `for at most ${seconds} s (+${grace} s to finish), seed ${seed}; job folder and volunteer log in ${workDir}`);
  const options = { ...CHURN_DEFAULTS, peers, hostSize, steps, seconds, seed, batch, finishGraceSec: grace, spareHosts, data, log };
  // Baselines before and after the churn run, each with the CPU it took (null off Linux).
  const calmRun = async (when: 'before' | 'after'): Promise<{ run: ChurnResult; cpuS: number | null }> => {
    log(`churn: the same peers and schedule without churn, ${when} the churn run (the goodput's baseline)`);
    const c0 = cpuSoFar();
    const run = await runChurn({ ...options, killEverySec: 0, leavePerSec: 0, workDir: join(workDir, `baseline-${when}`) });
    const c1 = cpuSoFar();
    return { run, cpuS: c0 !== null && c1 !== null ? c1 - c0 : null };
  };
  // The machine's speed beside the runs (bench/speed-probe.ts): CPU ms of a fixed loop.
  const probe = baseline ? new SpeedProbe() : null;
  if (probe) process.once('exit', () => probe.stop()); // also when a run throws
  const before = baseline ? await calmRun('before') : null;
  const cpu0 = cpuSoFar();
  const r = await runChurn({ ...options, killEverySec: killEvery, leavePerSec: leaveRate, workDir: join(workDir, 'churn') });
  const cpu1 = cpuSoFar();
  const after = baseline ? await calmRun('after') : null;
  probe?.stop();
  const speedOf = (x: ChurnResult) => (probe ? speedBetween(probe.samples, x.throughput.fromMs, x.throughput.toMs) : null);
  const speeds = before && after ? { before: speedOf(before.run), churn: speedOf(r), after: speedOf(after.run) } : null;
  // Images/s at one machine speed: a run's rate times the probe's CPU ms during it.
  const atSpeed = (x: ChurnResult, ms: number | null | undefined) => (ms ? x.throughput.imagesPerSec * ms : null);
  const equalSpeed = (() => {
    if (!speeds || !before || !after) return null;
    const [c, b, a] = [atSpeed(r, speeds.churn), atSpeed(before.run, speeds.before), atSpeed(after.run, speeds.after)];
    return c !== null && b !== null && a !== null && b + a > 0 ? c / ((b + a) / 2) : null;
  })();
  const calms = before && after ? [{ when: 'before', run: before.run }, { when: 'after', run: after.run }] : [];
  const windowOf = (x: ChurnResult) => x.throughput.toMs - x.throughput.fromMs;
  const calm = before && after
    ? bracketCalm(
      { imagesPerSec: before.run.throughput.imagesPerSec, split: before.run.stepSplit, windowMs: windowOf(before.run) },
      { imagesPerSec: after.run.throughput.imagesPerSec, split: after.run.stepSplit, windowMs: windowOf(after.run) },
    )
    : null;
  // Each run whole (ramp to last exit): this process (coordinator, schedule) and its host processes.
  const calmCpuS = before?.cpuS != null && after?.cpuS != null ? before.cpuS + after.cpuS : null;
  const cpu = calmCpuS !== null && cpu0 !== null && cpu1 !== null
    ? cpuSplit(
      { cpuS: cpu1 - cpu0, steps: r.history.finalStep, started: r.peers.started },
      { cpuS: calmCpuS / 2, steps: (before!.run.history.finalStep + after!.run.history.finalStep) / 2, started: before!.run.peers.started },
    )
    : null;
  const goodput = calm && calm.imagesPerSec > 0 ? r.throughput.imagesPerSec / calm.imagesPerSec : null;
  const loss = calm ? lossSplit({ split: r.stepSplit, windowMs: windowOf(r) }, calm) : null;
  const honestEvictions = r.evictionsOf.other + calms.reduce((n, c) => n + c.run.evictionsOf.other, 0);
  const h = r.history;
  const c = r.checkpoints;
  const failures = h.lostSteps.length + h.doubledSteps.length + c.unreadable.length + c.mismatches.length + c.wrongModel.length;
  log(`churn: ${r.endedBy} after ${r.seconds.toFixed(0)} s (churn ${r.churnSeconds.toFixed(0)} s): ${h.finalStep}/${steps} steps, ${h.aborts} aborts, `
    + `${r.evictions} evictions (${JSON.stringify(r.evictionsOf)}), ${h.generations} generations, max ring ${h.maxRing}`);
  log(`churn: volunteers started ${r.peers.started}, sessions ${r.peers.sessions}, leaves ${r.peers.leaves}, `
    + `killed ${r.peers.kills} in ${r.peers.hostKills} host kills, exits ${JSON.stringify(r.peers.exits)}`);
  const calmLine = (c: ChurnResult, when: string) => `${when} ${c.throughput.imagesPerSec.toFixed(1)} images/s, ${c.history.finalStep} steps, `
    + `lost ${c.history.lostSteps.length}, doubled ${c.history.doubledSteps.length}, ${c.evictions} evictions`;
  log(`churn: committed ${r.throughput.imagesPerSec.toFixed(1)} images/s with churn `
    + `(${r.throughput.reusedImages} of ${r.throughput.images} images reused from kept sums)`
    + `${calm && before && after
      ? `, ${calm.imagesPerSec.toFixed(1)} without: goodput ${goodput?.toFixed(3)}; without churn ${calmLine(before.run, 'before')}; `
        + `${calmLine(after.run, 'after')} (drift ${(100 * calm.drift).toFixed(1)}%)`
      : ''}; honest evictions ${honestEvictions}`);
  const split = (x: ChurnResult) => Object.entries(x.phaseSeconds).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(', ');
  if (speeds) {
    log(`churn: the machine's speed beside the runs (CPU ms of the probe's fixed loop, median): before ${speeds.before?.toFixed(1) ?? '-'}, `
      + `churn ${speeds.churn?.toFixed(1) ?? '-'}, after ${speeds.after?.toFixed(1) ?? '-'}; goodput at equal speed ${equalSpeed?.toFixed(3) ?? '-'}`);
  }
  log(`churn: where the coordinator's time went from the ramp's end to the churn's end: `
    + `${split(r)}${calms.map((c) => `; without churn (${c.when}): ${split(c.run)}`).join('')}`);
  const stepsLine = (x: ChurnResult) => `${x.stepSplit.first.steps} first steps of a generation `
    + `(median ${x.stepSplit.first.medianMs} ms, ${(x.stepSplit.first.totalMs / 1000).toFixed(1)} s in all), `
    + `${x.stepSplit.rest.steps} others (median ${x.stepSplit.rest.medianMs} ms, ${(x.stepSplit.rest.totalMs / 1000).toFixed(1)} s)`;
  log(`churn: committed steps: ${stepsLine(r)}${calms.map((c) => `; without churn (${c.when}): ${stepsLine(c.run)}`).join('')}`);
  const threadLine = (x: ChurnResult) => (x.threadCpu
    ? `host main threads ${x.threadCpu.hostMain.toFixed(1)}, their V8/libuv helpers ${x.threadCpu.hostHelpers.toFixed(1)}, `
      + `their WebRTC threads ${x.threadCpu.hostWebRtc.toFixed(1)}, this process ${x.threadCpu.bench.toFixed(1)} CPU-s over ${x.history.finalStep} steps`
    : 'not sampled (Linux only)');
  log(`churn: CPU by thread with churn: ${threadLine(r)}`);
  for (const c of calms) log(`churn: CPU by thread without churn (${c.when}): ${threadLine(c.run)}`);
  if (cpu) {
    log(`churn: CPU (this process and its host processes, each run whole): ${cpu.msPerStep.toFixed(0)} ms per committed step with churn, `
      + `${cpu.baselineMsPerStep.toFixed(0)} without`
      + `${cpu.extraSecondsPerStart === null
        ? ''
        : `: ${cpu.extraSecondsPerStart.toFixed(2)} CPU-s more for each volunteer started beyond the baseline's `
          + "(its start, its leave and the ring's changes around it)"}`);
  }
  if (loss) {
    log(`churn: goodput split: membership changes ${loss.membershipVsCalm?.toFixed(3) ?? '-'} `
      + `(steps at the run's own ordinary pace over its window, ${loss.membershipGoodput.toFixed(3)}, `
      + `over the same in the baselines, ${loss.calmShare?.toFixed(3) ?? '-'}) x ordinary pace ${loss.ordinaryPace.toFixed(3)} `
      + "(the baselines' ordinary step over the churn run's)");
  }
  log(`churn: lost ${h.lostSteps.length}, doubled ${h.doubledSteps.length}; checkpoints ${c.files} (unreadable ${c.unreadable.length}, `
    + `checksum mismatches ${c.mismatches.length}, no committed step ${c.unmatched.length})`);
  log(`churn: coordinator heap ${r.memory.heapMbStart.toFixed(1)} -> max ${r.memory.heapMbMax.toFixed(1)} -> end ${r.memory.heapMbEnd.toFixed(1)} MB, `
    + `slope ${r.memory.heapSlopeMbPerMin?.toFixed(2) ?? '-'} MB/min; driver at end ${JSON.stringify(r.driverAtEnd)}`);
  if (r.peers.ignoredLeaves.length) log(`churn: volunteers still training > 15 s after their leave: ${r.peers.ignoredLeaves.join(' ')}`);
  if (r.peers.neverEnded.length) log(`churn: volunteers that never ended on their own: ${r.peers.neverEnded.join(' ')}`);
  if (r.peers.errors.length) log(`churn: volunteer errors:\n  ${r.peers.errors.join('\n  ')}`);
  if (r.peers.unexpectedHostExits.length) log(`churn: hosts that died on their own:\n  ${r.peers.unexpectedHostExits.join('\n  ')}`);

  const result = {
    bench: 'churn',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, note: 'coordinator and every simulated volunteer share these cores (loopback WebRTC, WasmEngine)' },
    setup: {
      model: CHURN_MODEL, dataset: 'mnist', trainImages: 1200, peers, hostSize, steps, seconds, graceSeconds: grace, seed, batch, killEverySec: killEvery,
      leavePerSec: leaveRate, joinPerSec: CHURN_DEFAULTS.joinPerSec, rampPerSec: CHURN_DEFAULTS.rampPerSec, checkpointEvery: CHURN_DEFAULTS.checkpointEvery,
      spareHosts,
    },
    definitions: {
      lost_steps: 'step numbers in 1..final without a committed step record in metrics.jsonl',
      goodput: 'committed images/s with churn over the mean committed images/s of the same peers, job and schedule without churn (no leaves, no kills), '
        + 'run once before and once after the churn run; each from the ramp end to the churn end (or the job end)',
      goodput_equal_speed: "goodput with each run's images/s taken at one machine speed: times the median CPU ms that a fixed loop took during it "
        + "(bench/speed-probe.ts, a niced child process timing its own CPU every 2 s): what goodput would be had the machine not drifted",
      baseline_drift: 'the baseline after the churn run over the one before, minus 1 (committed images/s): '
        + 'how far two calm runs of the same ring differed around the churn run',
      honest_evictions: 'evictions of peers the schedule never asked to leave nor killed, in all three runs (false positives: slow is not dead)',
      reused_images: 'images of committed steps whose gradient a survivor reused from the sum it kept when the step lost a member (slice re-run)',
      doubled_steps: 'step numbers with more than one committed step record',
      stepSplit: "committed steps in the goodput's window: the first of each generation (its ring forms during it: new links are dialed, "
        + "kept ones handed over) against the rest, with median and total wall ms",
      phaseSeconds: "seconds the coordinator's driver spent in each kind of phase from the ramp end to the churn end: running (committedRunning: "
        + "the attempts that committed; the rest aborted), admitting (a checkpoint uploaded and loaded by joiners while the ring waits), evaluating, "
        + "between (deciding), paused",
      evictions: "peer-left events whose reason is an eviction (timeout, checksum dissent, blamed by the ring)",
      aborts: 'abort records: a step attempt abandoned because a member left, crashed or was evicted (it runs again)',
      rings_formed_again: "of the aborts, those where a link was lost in a generation's first step between two connected peers and the same ring formed again "
        + "(coordinator/blame.ts formAgain)",
      unreadable_checkpoints: 'checkpoint files that fail decodeCheckpoint (length, sha256, header)',
      checkpoint_checksum_mismatches: "checkpoints whose weightChecksum differs from the ring's committed checksum of that step",
      heap: 'this process (coordinator + schedule) after global.gc: start = before any volunteer, '
        + 'end = after every volunteer left with the coordinator still running',
      membership_goodput: "the churn run's committed steps timed at its own mean ordinary step (not a generation's first), over its window: "
        + "what membership changes cost (first steps of generations, admissions, aborted attempts), together with what any run pays between steps (calm_share)",
      calm_share: "membership_goodput's measure taken on the baselines (both together): their committed steps at their own mean ordinary step over their "
        + "windows. Below 1 with no churn at all: a step's wall time does not hold the coordinator's turn between steps",
      membership_vs_calm: 'membership_goodput / calm_share: what membership changes cost beyond what every run pays; '
        + 'membership_vs_calm x ordinary_pace is the committed steps per second with churn over without (goodput up to how the two baselines are averaged)',
      ordinary_pace: "the baselines' mean ordinary step (both runs' steps together) over the churn run's: below 1 when ordinary steps ran slower under churn "
        + "(here: joiners' start-up, exits and the first seconds of replacement host processes share the machine's cores with the ring)",
      heap_slope_mb_per_min: 'least-squares slope of heapUsed over the second half of the churn (ramp end .. churn end)',
      threadCpu: "CPU seconds by kind of thread from the host processes' start to the volunteers' end, sampled each second from /proc/<pid>/task/<tid>/stat "
        + "(bench/thread-cpu.ts): host processes' main threads (the volunteers' JavaScript), their other node threads (V8's compiler and GC helpers, libuv), "
        + "their libdatachannel threads (RTC workers, juice poll, SCTP timer), and this process (coordinator and schedule)",
      cpu: 'CPU seconds of this process and its reaped host processes (/proc/self/stat utime+stime+cutime+cstime), each run whole, per committed step; '
        + 'extra_cpu_s_per_start = (CPU with churn - its steps at the baseline CPU per step) / volunteers started beyond the baseline\'s',
    },
    goodput, goodput_equal_speed: equalSpeed, machine_speed_cpu_ms: speeds, baseline_drift: calm?.drift ?? null, honest_evictions: honestEvictions,
    lossSplit: loss, cpu,
    ...r,
    coordinatorLog: r.coordinatorLog.slice(-100),
    baselines: calms.map((c) => ({ when: c.when, ...c.run, samples: undefined, coordinatorLog: c.run.coordinatorLog.slice(-30) })),
  };
  const out = join(here, 'results');
  writeFileEnsuringDir(join(out, 'churn.json'), `${JSON.stringify(result, null, 1)}\n`);
  writeFileEnsuringDir(join(out, 'churn.svg'), plot(r, peers));
  log(`churn: wrote ${join(out, 'churn.json')} and churn.svg (${((performance.now() - t0) / 1000).toFixed(0)} s in all)`);
  const headline = {
    bench: 'churn', peers, steps: h.finalStep, lost_steps: h.lostSteps.length, doubled_steps: h.doubledSteps.length,
    goodput: r3(goodput), honest_evictions: honestEvictions,
    images_per_sec: r2(r.throughput.imagesPerSec), baseline_images_per_sec: calm ? r2(calm.imagesPerSec) : null,
    baseline_drift: r3(calm?.drift),
    goodput_equal_speed: r3(equalSpeed), reused_images: r.throughput.reusedImages,
    first_step_of_generation_ms: r.stepSplit.first.medianMs, other_step_ms: r.stepSplit.rest.medianMs,
    first_steps_share: r.stepSplit.first.totalMs + r.stepSplit.rest.totalMs > 0
      ? Math.round((1000 * r.stepSplit.first.totalMs) / (r.stepSplit.first.totalMs + r.stepSplit.rest.totalMs)) / 1000
      : null,
    membership_goodput: r3(loss?.membershipGoodput),
    calm_share: r3(loss?.calmShare),
    membership_vs_calm: r3(loss?.membershipVsCalm),
    ordinary_pace: r3(loss?.ordinaryPace),
    cpu_ms_per_step: cpu ? Math.round(cpu.msPerStep) : null, baseline_cpu_ms_per_step: cpu ? Math.round(cpu.baselineMsPerStep) : null,
    extra_cpu_s_per_start: cpu?.extraSecondsPerStart == null ? null : r2(cpu.extraSecondsPerStart),
    evictions: r.evictions, aborts: h.aborts, rings_formed_again: h.formedAgain, kills: r.peers.kills, max_ring: h.maxRing,
    unreadable_checkpoints: c.unreadable.length, checkpoint_checksum_mismatches: c.mismatches.length,
    heap_mb_start: r2(r.memory.heapMbStart), heap_mb_max: r2(r.memory.heapMbMax), heap_mb_end: r2(r.memory.heapMbEnd),
    heap_slope_mb_per_min: r.memory.heapSlopeMbPerMin === null ? null : r2(r.memory.heapSlopeMbPerMin),
    finished: r.finished, seconds: Math.round(r.seconds),
  };
  process.stdout.write(`${JSON.stringify(headline)}\n`);
  const calmFailures = calms.reduce((n, c) => n + c.run.history.lostSteps.length + c.run.history.doubledSteps.length, 0);
  if (failures + calmFailures > 0) process.exitCode = 1;
}
