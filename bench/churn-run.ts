// One churn run (bench/churn.ts and test/bench/churn.test.ts): a real job in this process
// (coordinator/run.ts: HTTP, PeerJS signaling, session sockets, job folder) and simulated
// volunteers in host processes (bench/churn-host.ts: the real client on WasmEngine), joining,
// leaving and crashing on a seeded schedule for a bounded time; then the job's history and
// checkpoints are checked and this process's memory over the run is summarised.
//
// Schedule, one decision per second (seeded, so a run can be repeated):
//   ramp:   up to rampPerSec new volunteers a second until `peers` are present
//   churn:  with probability leavePerSec a random volunteer leaves normally (its abort signal);
//           every killEverySec a random host process is SIGKILLed (all its volunteers crash
//           mid-step; at most maxKills times); the missing ones are replaced: all at once up
//           to rampPerSec when more than 2 are missing, else one with probability joinPerSec
//   end:    when the job has run its steps, or at `seconds` (churn stops; the peers present
//           get finishGraceSec to finish the job, else it is paused and everyone leaves)
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ensureDataset } from '../coordinator/data/cli.ts';
import { readMetrics } from '../coordinator/metrics.ts';
import type { PhaseTimes } from '../coordinator/driver.ts';
import { LEAVE_HOLD_MAX_MS } from '../coordinator/driver-generations.ts';
import { DEFAULT_TIMEOUTS } from '../coordinator/driver-types.ts';
import { runJob, type RunningJob } from '../coordinator/run.ts';
import { layoutFingerprint } from '../src/checkpoint/format.ts';
import type { LiveEvent } from '../src/protocol/messages.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { layoutOf } from '../src/nn/layout.ts';
import { modelByName } from '../src/nn/models.ts';
import { makeRng } from '../src/rng.ts';
import { checkCheckpoints, checkHistory, committedChecksums, committedThroughput, slope, stepSplit } from './churn-check.ts';
import { Host, Tail, type SimVolunteer } from './churn-hosts.ts';
import type { HostReport } from './churn-protocol.ts';
import { CHURN_MODEL, type ChurnOptions, type ChurnResult, type DriverSizes, type Sample } from './churn-types.ts';
import { ThreadCpuSampler } from './thread-cpu.ts';

/** Seconds per kind of phase between two of the driver's clock readings (from the start when `from` is null), rounded to 0.01 s. */
export function phaseWindow(from: PhaseTimes | null, to: PhaseTimes): Record<string, number> {
  return Object.fromEntries(Object.entries(to).map(([k, ms]) => [k, Math.round((ms - (from?.[k as keyof PhaseTimes] ?? 0)) / 10) / 100]));
}

/** The churn data set: MNIST's first 1,200 train and val images in shards of 400, built once into `cacheDir`/mnist. */
export async function churnData(cacheDir: string): Promise<{ dataDir: string; manifest: Manifest }> {
  const manifest = await ensureDataset('mnist', cacheDir, { limit: 1200, samplesPerShard: 400, progress: false });
  return { dataDir: cacheDir, manifest };
}

/**
 * A volunteer still training this long after it was asked to leave ignored the leave. Under
 * churn the coordinator holds a leaver for up to LEAVE_HOLD_MAX_MS, then the announcement's wait
 * (prepareMs) and a step (driver-generations.ts): the bound is past those.
 */
const LATE_LEAVE_MS = LEAVE_HOLD_MAX_MS + DEFAULT_TIMEOUTS.prepareMs + 3000;
/** Host processes get this long to start (a first run may build the wasm kernels). */
const HOST_START_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MB = 2 ** 20;

/** Resolves `p`, or rejects with `what` after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${ms / 1000} s waiting ${what}`)), ms); });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** global.gc, exposed at run time if node was not started with --expose-gc. */
function exposeGc(): (() => void) | null {
  const existing: unknown = Reflect.get(globalThis, 'gc');
  if (typeof existing === 'function') return () => void existing();
  setFlagsFromString('--expose-gc');
  const gc: unknown = runInNewContext('gc');
  return typeof gc === 'function' ? () => void gc() : null;
}

async function driverSizes(job: RunningJob): Promise<DriverSizes> {
  const connections = await new Promise<number>((res) => job.coordinator.server.getConnections((e, n) => res(e ? -1 : n)));
  return { ...job.driver.tableSizes(), connections, eventClients: job.coordinator.events.clients };
}

export async function runChurn(o: ChurnOptions): Promise<ChurnResult> {
  if (o.peers < 1 || o.hostSize < 1) throw new RangeError(`churn needs peers >= 1 and hostSize >= 1, got ${o.peers} and ${o.hostSize}`);
  const gc = exposeGc();
  const rng = makeRng(o.seed);
  mkdirSync(o.workDir, { recursive: true });
  const jobDir = join(o.workDir, 'job');
  const volunteerLog = join(o.workDir, 'volunteers.log');
  const coordinatorLog = new Tail(400);
  const evictionReasons: string[] = [];
  let evictions = 0;
  const byPeerId = new Map<string, SimVolunteer>();
  let sessions = 0;
  const lateAfterLeave = new Set<string>();
  const evictionsOf = { leaving: 0, killed: 0, other: 0 };
  const onEvent = (e: LiveEvent) => {
    if (e.type === 'peer-left' && e.reason.startsWith('evicted:')) {
      evictions++;
      // A peer that was just asked to leave or was killed is often blamed by a ring neighbour
      // before its session's end reaches the coordinator: the same outcome by another path.
      const v = byPeerId.get(e.peerId);
      const kind = v?.fate === 'killed' ? 'killed' : v?.leftAt !== undefined ? 'leaving' : 'other';
      evictionsOf[kind]++;
      if (evictionReasons.length < 50) evictionReasons.push(`${v?.name ?? '?'} (${kind}): ${e.reason.slice(0, 300)}`);
    }
  };
  const { manifest } = o.data;
  const spec = modelByName(CHURN_MODEL, [manifest.image.channels, manifest.image.height, manifest.image.width], manifest.classes.length);
  const fingerprint = layoutFingerprint(spec.name, layoutOf(spec));

  const job = await runJob({
    jobDir, dataDir: o.data.dataDir, manifest, evalSamples: 60, heartbeatMs: 1000,
    config: {
      name: 'churn', model: CHURN_MODEL, dataset: manifest.dataset, globalBatch: o.batch, steps: o.steps,
      optimizer: { kind: 'lars', lr: 0.5, warmupSteps: 2 }, evalEvery: 0, checkpointEvery: o.checkpointEvery, keepCheckpoints: 100, seed: o.seed, minPeers: 1,
    },
    // A killed peer's session closes at once; these catch hung ones, and stay well above a step here.
    // silentMs and firstSilentMs are the driver's defaults (silence.ts): honest_evictions says whether they are safe here.
    timeouts: { stepMs: 20_000, admitMs: 20_000, evalMs: 20_000 },
    // Every simulated peer comes from 127.0.0.1: one address for 50 peers.
    rateLimits: { requests: { perSecond: 5000, burst: 20_000 }, joins: { perSecond: 200, burst: 400 } },
    log: (l) => coordinatorLog.push(`${new Date().toISOString().slice(11, 23)} ${l}`),
    onEvent,
  });
  let t0 = Date.now();
  const now = () => (Date.now() - t0) / 1000;
  let finished = false;
  void job.driver.finished.then(() => { finished = true; });

  // ---- hosts and volunteers ----
  const hosts: Host[] = [];
  /** Started before the clock, not yet given volunteers (ChurnOptions.spareHosts). */
  const spares: Host[] = [];
  const threads = new ThreadCpuSampler(() => [...hosts, ...spares].filter((h) => h.alive && h.child.pid !== undefined).map((h) => h.child.pid!));
  const volunteers: SimVolunteer[] = [];
  const exits: Record<string, number> = {};
  const errors: string[] = [];
  const unexpectedHostExits: string[] = [];
  let leaves = 0;
  let kills = 0;
  let hostKills = 0;
  let maxPresent = 0;
  const exited = new Set<SimVolunteer>();
  const reported = new Set<SimVolunteer>();
  const byName = new Map<string, SimVolunteer>();
  const events = {
    report(h: Host, r: HostReport) {
      const v = 'name' in r ? byName.get(r.name) : undefined;
      if (r.type === 'joined' && v) {
        v.peerIds.push(r.peerId);
        byPeerId.set(r.peerId, v);
        sessions++;
        // A join that completes after the leave is fine: the session ends at once (it checks the signal).
      } else if (r.type === 'step' && v && v.leftAt !== undefined && Date.now() - v.leftAt > LATE_LEAVE_MS) lateAfterLeave.add(v.name);
      else if (r.type === 'exit' && v) {
        exited.add(v);
        reported.add(v);
        exits[r.reason] = (exits[r.reason] ?? 0) + 1;
        if (v.fate === 'running') v.fate = r.reason;
        if (r.reason === 'error') {
          v.error = r.error;
          if (errors.length < 50) errors.push(`${v.name} on ${h.name}: ${r.error ?? '?'}`);
        }
      }
    },
    line(h: Host, l: string) {
      appendFileSync(volunteerLog, `${now().toFixed(1)} ${h.name} ${l}\n`);
    },
    exit(h: Host, code: number | null, signal: NodeJS.Signals | null) {
      for (const v of h.volunteers.values()) {
        exited.add(v);
        if (v.fate === 'running') v.fate = 'error';
      }
      if (!h.killed && !h.quitting) unexpectedHostExits.push(`${h.name} exited with ${code ?? signal}: ${h.tail.lines.slice(-40).join(' | ')}`);
    },
  };
  const running = () => volunteers.filter((v) => v.fate === 'running');
  const occupied = (h: Host) => [...h.volunteers.values()].filter((v) => !exited.has(v)).length;
  const startVolunteer = (): void => {
    let host = hosts.filter((h) => h.alive && !h.killed && !h.quitting && occupied(h) < o.hostSize).sort((a, b) => occupied(b) - occupied(a))[0];
    if (!host) {
      while (spares.length && !spares[0]!.alive) spares.shift();
      host = spares.shift() ?? new Host(`h${hosts.length}`, events);
      hosts.push(host);
    }
    const v = host.start(`v${volunteers.length}`, job.url);
    volunteers.push(v);
    byName.set(v.name, v);
  };

  // ---- memory samples, every second ----
  const samples: Sample[] = [];
  const driverMax = { peers: 0, uploads: 0, connections: 0 };
  const sample = async (): Promise<Sample> => {
    gc?.();
    const m = process.memoryUsage();
    const s = job.driver.status();
    const sizes = await driverSizes(job);
    driverMax.peers = Math.max(driverMax.peers, sizes.peers ?? 0);
    driverMax.uploads = Math.max(driverMax.uploads, sizes.uploads ?? 0);
    driverMax.connections = Math.max(driverMax.connections, sizes.connections);
    const present = running().length;
    maxPresent = Math.max(maxPresent, present);
    const hostsRssMb = hosts.filter((h) => h.alive).reduce((a, h) => a + (h.lastMemory?.rssMb ?? 0), 0);
    const x: Sample = { t: now(), step: s.step, ring: s.ring.length, connected: s.peers, present, heapMb: m.heapUsed / MB, rssMb: m.rss / MB, hostsRssMb };
    samples.push(x);
    return x;
  };
  // ---- the schedule ----
  let closed = false;
  let rampDone = false;
  let rampEnd = 0;
  let rampClock: PhaseTimes | null = null;
  let lastKill = 0;
  let sampling = true;
  try {
    // The first hosts start before the clock does (node, tsx, WebRTC, the wasm kernels: a few s).
    for (let i = 0; i < Math.ceil(o.peers / o.hostSize); i++) hosts.push(new Host(`h${hosts.length}`, events));
    for (let i = 0; i < (o.spareHosts ?? 0); i++) spares.push(new Host(`spare${i}`, events));
    await within(Promise.all([...hosts, ...spares].map((h) => h.ready)), HOST_START_MS, 'for the host processes to start');
    threads.begin();
    o.log(`churn: ${hosts.length} host processes ready after ${now().toFixed(1)} s${spares.length ? ` (and ${spares.length} spares)` : ''}`);
    t0 = Date.now();
    const sampler = (async () => {
      while (sampling) {
        const s = await sample();
        if (Math.round(s.t) % 10 === 0) {
          o.log(`churn: ${s.t.toFixed(0)} s step ${s.step}/${o.steps} ring ${s.ring} connected ${s.connected} present ${s.present} `
            + `heap ${s.heapMb.toFixed(1)} MB`);
        }
        await sleep(1000);
      }
    })();

    for (let tick = 0; !finished && now() < o.seconds; tick++) {
      const t = now();
      const present = running();
      if (!rampDone && present.length >= o.peers) {
        rampDone = true;
        rampEnd = t;
        rampClock = job.driver.phaseTimes();
        lastKill = t;
        o.log(`churn: ${o.peers} volunteers started by ${t.toFixed(1)} s; churn until ${o.seconds} s`);
      }
      if (!rampDone) {
        for (let i = 0; i < Math.min(o.rampPerSec, o.peers - present.length); i++) startVolunteer();
      } else {
        if (present.length > 0 && rng.next() < o.leavePerSec) {
          const v = present[rng.int(present.length)]!;
          v.host.leave(v);
          leaves++;
        }
        if (o.killEverySec > 0 && hostKills < o.maxKills && t - lastKill >= o.killEverySec) {
          const candidates = hosts.filter((h) => h.alive && !h.killed && h.running.length > 0);
          if (candidates.length) {
            const h = candidates[rng.int(candidates.length)]!;
            const victims = h.kill();
            kills += victims.length;
            hostKills++;
            lastKill = t;
            o.log(`churn: ${t.toFixed(1)} s SIGKILL ${h.name} (${victims.length} volunteers: ${victims.map((v) => v.name).join(' ')})`);
          }
        }
        const deficit = o.peers - running().length;
        if (deficit > 2) for (let i = 0; i < Math.min(deficit, o.rampPerSec); i++) startVolunteer();
        else if (deficit > 0 && rng.next() < o.joinPerSec) startVolunteer();
      }
      // The next decision one second after this one started.
      await sleep(Math.max(0, (tick + 1) * 1000 - (Date.now() - t0)));
    }
    const churnSeconds = now();
    const churnClock = job.driver.phaseTimes();
    let endedBy: ChurnResult['endedBy'] = 'finished';
    if (!finished) {
      o.log(`churn: the time bound (${o.seconds} s) came first at step ${job.driver.status().step}/${o.steps}: `
        + `churn stops; the ${running().length} peers present get ${o.finishGraceSec} s to finish`);
      const until = Date.now() + o.finishGraceSec * 1000;
      while (!finished && Date.now() < until) await sleep(250);
      endedBy = finished ? 'time bound, finished in the grace' : 'time bound, stopped';
      if (!finished) {
        o.log(`churn: not finished in the grace: pausing the job at step ${job.driver.status().step} and sending everyone away`);
        job.driver.pause();
        const pauseBy = Date.now() + 30_000;
        while (job.driver.status().phase !== 'paused' && Date.now() < pauseBy) await sleep(250);
      }
    }
    // Finished: every volunteer got 'done' and leaves on its own. Stopped: everyone leaves now.
    if (!finished) for (const v of running()) v.host.leave(v);
    const leaveBy = Date.now() + 30_000;
    while (volunteers.some((v) => !exited.has(v)) && Date.now() < leaveBy) await sleep(250);
    const threadCpu = threads.end();
    const spawned = hosts.length;
    hosts.push(...spares.splice(0));
    for (const h of hosts) if (h.alive) h.quit();
    const quitBy = Date.now() + 15_000;
    while (hosts.some((h) => h.alive) && Date.now() < quitBy) await sleep(250);
    for (const h of hosts) if (h.alive) { h.quitting = true; h.child.kill('SIGKILL'); }
    await Promise.all(hosts.map((h) => h.exited));
    sampling = false;
    await sampler;
    // Every volunteer is gone and the coordinator still runs: what it holds now, it keeps.
    await sleep(1500);
    const end = await sample();
    const driverAtEnd = await driverSizes(job);
    closed = true;
    await job.close();

    const records = await readMetrics(join(jobDir, 'metrics.jsonl'));
    const history = checkHistory(records);
    const throughput = committedThroughput(records, t0 + rampEnd * 1000, t0 + churnSeconds * 1000);
    const checkpoints = await checkCheckpoints(jobDir, fingerprint, committedChecksums(records));
    const churnSamples = samples.filter((s) => s.t >= rampEnd && s.t <= churnSeconds);
    const half = churnSamples.filter((s) => s.t >= (rampEnd + churnSeconds) / 2);
    const k = slope(half.map((s) => [s.t / 60, s.heapMb]));
    const first = samples[0]!;
    return {
      seconds: now(), churnSeconds, endedBy, finished, history, checkpoints, throughput, evictions, evictionsOf, evictionReasons,
      peers: {
        started: volunteers.length, sessions, leaves, kills, hostKills, maxPresent, exits, errors, hostsSpawned: spawned, unexpectedHostExits,
        ignoredLeaves: [...lateAfterLeave], neverEnded: volunteers.filter((v) => !reported.has(v) && v.fate !== 'killed' && !v.host.killed).map((v) => v.name),
      },
      memory: {
        heapMbStart: first.heapMb, heapMbMax: Math.max(...samples.map((s) => s.heapMb)), heapMbEnd: end.heapMb,
        rssMbStart: first.rssMb, rssMbMax: Math.max(...samples.map((s) => s.rssMb)), rssMbEnd: end.rssMb,
        heapSlopeMbPerMin: k, slopeWindowS: [half[0]?.t ?? 0, half[half.length - 1]?.t ?? 0],
        hostRssMbMax: Math.max(0, ...samples.map((s) => s.hostsRssMb)), gc: gc !== null,
      },
      threadCpu, driverAtEnd, driverMax, phaseSeconds: phaseWindow(rampClock, churnClock),
      stepSplit: stepSplit(records, t0 + rampEnd * 1000, t0 + churnSeconds * 1000), samples, coordinatorLog: coordinatorLog.lines,
    };
  } finally {
    sampling = false;
    threads.stop();
    for (const h of [...hosts, ...spares]) if (h.alive) { h.quitting = true; h.child.kill('SIGKILL'); }
    if (!closed) await job.close();
  }
}
