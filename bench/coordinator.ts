// `npm run bench -- coordinator`: how many volunteers one coordinator process holds. The
// coordinator runs alone on one core (taskset -c 0) with a job stepping (small CNN on MNIST, B =
// 16,384, sync steps); protocol-level simulated volunteers (bench/coordinator-sim.ts: real HTTP
// joins, session sockets with heartbeats, PeerJS signaling sockets, state loads, step results
// after a simulated compute, checkpoint uploads, rings announced ahead) join in waves from
// this process on the other core, and a few die without a word in each wave. At each size it
// measures, over its steady steps, the coordinator's own added latency per step (its turn: from
// the last result of step s in to the assignments of step s+1 out, timed inside it; also the same
// gap as the simulated peers saw it, which adds the sockets and this process), its CPU, and any
// session it dropped (a missed heartbeat deadline or an eviction).
// The largest size with no drop and a p99 added latency under 50 ms is `max_sessions`. A ring
// holds at most MAX_RING (1,024) peers; sessions beyond it wait for a place, heartbeating. With
// --profile the coordinator runs under --cpu-prof (which slows its turns) and the bench prints where its time
// went (self time by function). The coordinator also times each turn in parts (coordinator/driver.ts Turn: the commit, the
// next step's plan, encoding and writing the assignments), which the bench reports per size.
//
//   npm run bench -- coordinator [--sessions 250,500,1000,2000,3000] [--steps 8] [--compute-ms 300] [--kill 2]
//                                [--batch 16384] [--profile] [--no-pin] [--keep-going]
//
// Writes bench/results/coordinator.json and coordinator.svg and prints, last,
// {"bench":"coordinator","max_sessions":..,"p99_step_overhead_ms_at_max":..,"heartbeat_misses":..,"cpu_per_session_us":..,...}
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Args } from '../src/cli/args.ts';
import { buildShards } from '../coordinator/data/cli.ts';
import { ROOT } from '../coordinator/local-volunteers.ts';
import { MAX_RING } from '../src/protocol/messages.ts';
import { layoutOf } from '../src/nn/layout.ts';
import { modelByName } from '../src/nn/models.ts';
import { layoutFingerprint } from '../src/checkpoint/format.ts';
import { quantile } from '../src/stats.ts';
import { tempRoot } from '../testbed/jobs.ts';
import { SimPeer, newSimLog, zeroCheckpoint, type SimOptions } from './coordinator-sim.ts';
import { lineChartSvg } from './plot-lines.ts';
import { writeFileEnsuringDir } from './plot.ts';
import { summariseProfile, type ProfileLine } from './coordinator-profile.ts';
import type { Turn } from '../coordinator/driver.ts';

const USAGE = 'usage: npm run bench -- coordinator [--sessions 250,500,1000,2000,3000] [--steps 8] [--compute-ms 300] [--kill 2] '
  + '[--batch 16384] [--profile] [--no-pin] [--keep-going]';
/**
 * MB of V8's semi-space (young generation) npm start runs the coordinator with (package.json's "start"): each turn makes
 * ~MBs of short-lived objects at 1,000 peers, and at the default size scavenges landed in turns (3 runs each, 1,000 and
 * 2,000 sessions: turn p50 40-51 ms, p99 55-84 by default; 31-38 and 49-60 at 64 MB).
 */
export const COORDINATOR_SEMI_SPACE_MB = 64;
/** The added latency a step may take at the 99th percentile (the goal). */
export const P99_GOAL_MS = 50;

export interface WaveResult {
  sessions: number;
  /** Steps measured (no membership change between them). */
  steps: number;
  /** The coordinator's turn between steps (its last result in, the next step's assignments out), measured in it: p50, p99, max. */
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** The turn's parts (median over the steps): the commit and the boundary, the next step's plan, encoding and writing its assignments. */
  partsP50Ms: { commit: number; plan: number; send: number } | null;
  /** Every measured turn in its parts (ms), in order: where the slow ones went. */
  turns: Turn[];
  /** The same gap as the simulated peers saw it (last result sent to last assignment received: adds the sockets and this process). */
  seenP99Ms: number | null;
  /** Sessions the coordinator dropped or evicted in this wave that were not killed on purpose. */
  drops: number;
  /** The coordinator's CPU over the steady window: its share of one core, and microseconds per session per second. */
  cpuShare: number;
  cpuPerSessionUs: number;
  stepMs: number | null;
  ok: boolean;
}

/** The coordinator's user + system CPU seconds so far (Linux /proc), or null elsewhere. */
async function cpuSeconds(pid: number): Promise<number | null> {
  try {
    const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`coordinator bench: timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

export async function main(argv: string[]): Promise<void> {
  const a = new Args(argv);
  const sizes = a.str('sessions', '250,500,1000,1500,2000,2500,3000').split(',').map(Number);
  const stepsPerWave = a.int('steps', 8, 3);
  const computeMs = a.int('compute-ms', 300, 1);
  const kill = a.int('kill', 2, 0);
  const profile = a.flag('profile');
  a.flag('no-profile'); // the default now; accepted as before
  // Pinning: the coordinator to core 0, this process (the simulated volunteers) to core 1; --no-pin leaves both free (tests).
  const pin = !a.flag('no-pin');
  // Measure every size given, past the first that fails (to see how the turn grows).
  const keepGoing = a.flag('keep-going');
  // ImageNet-like slices (B = 16,384 over 2,000 peers: 8 each); the MNIST split holds B + a little.
  const batch = a.int('batch', 16_384, 1);
  a.rejectUnknown(USAGE);
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--sessions must be a comma-separated list of sizes, got ${sizes.join(',')}`);

  const root = await tempRoot('coordinator-bench');
  let coord: ChildProcess | null = null;
  const peers: SimPeer[] = [];
  try {
    const dataDir = join(root.dir, 'data');
    const limit = Math.ceil((batch * 1.2) / 100) * 100;
    const manifest = await buildShards({ dataset: 'mnist', out: join(dataDir, 'mnist'), limit, samplesPerShard: 1000, progress: false });
    const spec = modelByName('small-cnn', [1, 28, 28], 10);
    const layout = layoutOf(spec);
    const config = {
      name: 'coordinator-bench', model: 'small-cnn', dataset: 'mnist', globalBatch: batch, steps: 1_000_000, optimizer: { kind: 'lars', lr: 1 },
      evalEvery: 0, checkpointEvery: 1_000_000, stealFraction: 0, seed: 1,
    };
    const pinned = pin && availableParallelism() >= 2 && spawnSync('taskset', ['-V']).status === 0;
    const profDir = join(root.dir, 'profile');
    // The young generation npm start gives the coordinator (package.json, COORDINATOR_SEMI_SPACE_MB): fewer scavenges in a turn.
    const nodeArgs = [
      `--max-semi-space-size=${COORDINATOR_SEMI_SPACE_MB}`, '--import', 'tsx', '--import', './scripts/raw-loader.mjs',
      ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []),
      'bench/coordinator-serve.ts',
      JSON.stringify({ jobDir: join(root.dir, 'job'), dataDir, manifest, config, heartbeatMs: 2000 })];
    const stdio: ['ignore', 'pipe', 'pipe', 'ipc'] = ['ignore', 'pipe', 'pipe', 'ipc'];
    coord = pinned
      ? spawn('taskset', ['-c', '0', process.execPath, ...nodeArgs], { cwd: ROOT, stdio })
      : spawn(process.execPath, nodeArgs, { cwd: ROOT, stdio });
    const turnsSince = (): Promise<Turn[]> => new Promise((resolve) => {
      coord!.once('message', (m) => resolve((m as { turns: Turn[] }).turns));
      coord!.send('turns');
    });
    // The simulated volunteers on the other core.
    if (pinned) spawnSync('taskset', ['-a', '-cp', '1', String(process.pid)]);
    const errLines: string[] = [];
    coord.stderr!.setEncoding('utf8').on('data', (d: string) => {
      errLines.push(...d.split('\n').filter(Boolean));
      if (errLines.length > 200) errLines.splice(0, errLines.length - 200);
    });
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      coord!.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        const m = /listening (\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      coord!.once('exit', (code) => reject(new Error(`the coordinator exited (${code}): ${errLines.slice(-10).join('\n')}`)));
    });
    const log = newSimLog();
    const counts = log.assigned;
    const checkpoint = zeroCheckpoint(layoutFingerprint(spec.name, layout), layout.paramFloats, layout.stateFloats);
    const o: SimOptions = { url, computeMs, jitterMs: 30, checkpoint, log };
    let addr = 0;
    const nextAddress = () => `127.0.0.${2 + (addr++ % 250)}`;
    const alive = () => peers.filter((p) => !p.killed);
    const results: WaveResult[] = [];
    let named = 0;
    for (const size of sizes) {
      const before = log.dropped.length;
      const startStep = Math.max(-1, ...counts.keys());
      // Join the wave, 50 at a time.
      while (alive().length < size) {
        const n = Math.min(50, size - alive().length);
        peers.push(...(await Promise.all(Array.from({ length: n }, () => SimPeer.join(o, `sim-${++named}`, nextAddress())))));
      }
      // Wait for a step that every live session was assigned (the whole wave in the ring).
      // The ring holds at most MAX_RING of them; the rest are sessions waiting for a place.
      const inRing = () => Math.min(alive().length, MAX_RING);
      const newestFull = (): number => {
        const n = inRing();
        let best = -1;
        for (const [step, c] of counts) if (c >= n && step > best) best = step;
        return best;
      };
      await until(() => newestFull() > startStep + 1 || log.dropped.length > before, 300_000, `a step with all ${size} sessions in the ring`);
      const first = newestFull();
      await turnsSince();
      const cpu0 = await cpuSeconds(coord.pid!);
      const t0 = performance.now();
      // A few die without a word after the first steady steps; the rest of the window runs on.
      let killedAt = -1;
      await until(() => newestFull() >= first + 2 || log.dropped.length > before, 300_000, 'two steady steps');
      if (kill > 0) {
        killedAt = newestFull();
        for (let k = 0; k < kill; k++) alive()[Math.floor(Math.random() * alive().length)]!.kill();
      }
      await until(() => newestFull() >= first + stepsPerWave + 1 || log.dropped.length > before, 600_000, `${stepsPerWave} steps of ${size} sessions`);
      const t1 = performance.now();
      const cpu1 = await cpuSeconds(coord.pid!);
      const parts = await turnsSince();
      const turns = parts.map((t) => t.ms);
      const last = newestFull();
      // Added latency of step s: from its last result to the last assignment of s + 1, over steps
      // assigned exactly once to the whole ring (a death's abort and re-run are left out).
      const overheads: number[] = [];
      for (let s = first; s < last; s++) {
        if (s >= killedAt - 1 && s <= killedAt + 1 && killedAt >= 0) continue;
        const res = log.lastResultAt.get(s);
        const next = log.lastAssignedAt.get(s + 1);
        if (res === undefined || next === undefined || (counts.get(s + 1) ?? 0) > Math.min(size, MAX_RING)) continue;
        overheads.push(next - res);
      }
      const drops = log.dropped.length - before;
      const wallS = (t1 - t0) / 1000;
      const cpu = cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null;
      const p99 = turns.length ? quantile(turns, 0.99) : null;
      const r: WaveResult = {
        sessions: size, steps: turns.length, p50Ms: turns.length ? +quantile(turns, 0.5).toFixed(1) : null, p99Ms: p99 === null ? null : +p99.toFixed(1),
        maxMs: turns.length ? +Math.max(...turns).toFixed(1) : null, drops,
        partsP50Ms: parts.length ? {
          commit: +quantile(parts.map((t) => t.commitMs), 0.5).toFixed(1), plan: +quantile(parts.map((t) => t.planMs), 0.5).toFixed(1),
          send: +quantile(parts.map((t) => t.sendMs), 0.5).toFixed(1),
        } : null,
        turns: parts.map((t) => ({ ms: +t.ms.toFixed(2), commitMs: +t.commitMs.toFixed(2), planMs: +t.planMs.toFixed(2), sendMs: +t.sendMs.toFixed(2) })),
        seenP99Ms: overheads.length ? +quantile(overheads, 0.99).toFixed(1) : null,
        cpuShare: cpu === null ? 0 : +(cpu / wallS).toFixed(3), cpuPerSessionUs: cpu === null ? 0 : Math.round((cpu / wallS / size) * 1e6),
        stepMs: last > first ? +((t1 - t0) / (last - first)).toFixed(0) : null,
        ok: drops === 0 && p99 !== null && p99 < P99_GOAL_MS,
      };
      results.push(r);
      const why = drops ? `: ${log.dropped.slice(before, before + 3).join('; ')}` : '';
      console.error(`coordinator bench: ${size} sessions: turn p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, max ${r.maxMs} ms over ${r.steps} steps of ${r.stepMs} ms`
        + ` (parts p50: commit ${r.partsP50Ms?.commit} ms, plan ${r.partsP50Ms?.plan} ms, send ${r.partsP50Ms?.send} ms;`
        + ` p99 as the simulated peers saw it, with their own process's backlog: ${r.seenP99Ms} ms);`
        + ` coordinator CPU ${(r.cpuShare * 100).toFixed(0)}% of a core (${r.cpuPerSessionUs} us/s per session);`
        + ` ${drops} dropped${why}`);
      if (!r.ok && !keepGoing) break;
    }
    for (const p of peers) if (!p.killed) p.kill();
    coord.kill('SIGTERM');
    await new Promise((r) => coord!.once('exit', r));
    coord = null;
    let where: ProfileLine[] = [];
    if (profile) {
      const files = (await readdir(profDir).catch(() => [] as string[])).filter((f) => f.endsWith('.cpuprofile'));
      if (files[0]) where = summariseProfile(JSON.parse(await readFile(join(profDir, files[0]), 'utf8')) as unknown, 25, ROOT).filter((w) => w.fn !== '(idle)');
      for (const w of where) console.error(`  ${(w.share * 100).toFixed(1).padStart(5)}%  ${w.fn}  ${w.at}`);
    }
    // The largest size below the first that failed.
    const failedAt = results.findIndex((r) => !r.ok);
    const passed = failedAt < 0 ? results : results.slice(0, failedAt);
    const atMax = passed[passed.length - 1] ?? null;
    const summary = {
      bench: 'coordinator', max_sessions: atMax?.sessions ?? 0, p99_step_overhead_ms_at_max: atMax?.p99Ms ?? null,
      heartbeat_misses: results.reduce((n, r) => n + r.drops, 0), cpu_per_session_us: atMax?.cpuPerSessionUs ?? null,
      cpu_share_at_max: atMax?.cpuShare ?? null, first_failing: results.find((r) => !r.ok)?.sessions ?? null, pinned, compute_ms: computeMs,
      turn_parts_p50_ms_at_max: atMax?.partsP50Ms ?? null,
      p99_ms_by_sessions: Object.fromEntries(results.map((r) => [r.sessions, r.p99Ms])),
      top_self_time: where.slice(0, 5).map((w) => `${w.fn} ${(w.share * 100).toFixed(1)}%`),
    };
    const json = { summary, waves: results, profile: where, date: new Date().toISOString() };
    writeFileEnsuringDir(join(ROOT, 'bench', 'results', 'coordinator.json'), `${JSON.stringify(json, null, 2)}\n`);
    writeFileEnsuringDir(join(ROOT, 'bench', 'results', 'coordinator.svg'), lineChartSvg({
      title: 'One coordinator process: added latency per step (p99, ms) and its CPU (% of a core) by sessions',
      xLabel: 'sessions', yLabel: 'ms / %',
      series: [
        { name: 'p99 added latency (ms)', points: results.map((r) => [r.sessions, r.p99Ms ?? 0] as [number, number]) },
        { name: 'CPU (% of one core)', points: results.map((r) => [r.sessions, r.cpuShare * 100] as [number, number]) },
      ],
    }));
    console.log(JSON.stringify(summary));
  } finally {
    for (const p of peers) if (!p.killed) p.kill();
    coord?.kill('SIGKILL');
    await root.remove();
  }
}
