// `npm run bench -- allreduce [--quick]`: ring all-reduce over loopback WebRTC (node-datachannel,
// PeerJS signaling), N = 2, 3, 4 peers, each its own OS process (bench/allreduce-peer.ts), on
// 4 MiB and 100 MiB of float32, against
//   - the bound 2(N-1)/N * bytes / B, B = per-link throughput measured in this run, in the same
//     processes, while all N links of the ring stream at once (same frames, same back-pressure,
//     no sums): on this 2-core machine the cores, not the links, are the limit, and B says what
//     the cores give each link when N processes share them;
//   - a naive star: everyone sends its buffer to peer 0, which sums and then sends the sum back.
// This process runs the signaling server and the rounds: it issues ids and tokens, tells peers
// what to form, starts every round at once after all are ready (a barrier over IPC), and takes a
// round's time as the max over peers of their own measured times, after one warm-up round.
// Also a message-size sweep and the half-precision wire formats (time and error).
// Writes bench/results/allreduce.json and allreduce.svg; prints one JSON summary line last.
//
// Experiment knobs (environment; unset = the defaults the library ships):
//   VT_MSG=bytes    frame size incl. the 32-byte header (default 64 KiB, max 262144)
//   VT_HIGH / VT_LOW=bytes   back-pressure marks of ring and stream (default 1 MiB / 256 KiB)
//   VT_MTU=bytes    libdatachannel path MTU of the Node peers (default ~1200)
//   VT_SCTP=JSON    node-datachannel SCTP settings, e.g. '{"delayedSackTime":0}'
// Measured here (100 MiB, N=4, 2 shared cores, one other benchmark running; ring s / bound s):
//   default        8.7-10.5 / 6.6-8.7, ring 13.4-16.3 CPU-s a round
//   VT_MTU=4000    4.6-4.8 / 3.7-3.8, ring 7.8 CPU-s: half the packets, half the CPU, twice as
//                  fast for ring, stream and star alike (efficiency unchanged, 0.77-0.81).
//                  9000 and 16000 hang (datagrams over ~4 KiB are lost on the way in).
//   VT_MSG=262144, VT_HIGH=4 MiB/VT_LOW=1 MiB: within the noise (CPU-s unchanged).
//   Both directions at once (half the buffer counter-clockwise; tried and removed): same time,
//   ~20% more CPU-s (16.8 vs 13.9), so no help while the cores are the limit.
import { fork, type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSignalingServer } from '../coordinator/signaling.ts';
import { DEFAULT_MESSAGE_BYTES, type WireFormat } from '../src/comm/index.ts';
import { envInt, parseFromPeer, type FailureKind, type FromPeer, type ResultCheck, type Task, type ToPeer } from './allreduce-protocol.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { median } from './timing.ts';

const MiB = 1 << 20;
const here = dirname(fileURLToPath(import.meta.url));
const PEER_SCRIPT = join(here, 'allreduce-peer.ts');
const MAX_PEERS = 4;
/** The whole benchmark stops itself (children killed, exit code 1) past this. */
const DEADLINE_MS = 9 * 60_000;
/** Forming links: each peer gives up after 4 s; then the whole attempt is retried. */
const PREPARE_TIMEOUT_MS = 30_000;
const CONNECT_ATTEMPTS = 3;
/** Warm-up rounds move at most this much (JIT, SCTP windows), not a whole 100 MiB. */
const WARM_BYTES = 16 * MiB;
/**
 * Worst accepted |result - float64 sum| / sum|inputs| per wire format, element by element. Not the
 * int8 wire's measure: its error scales with each frame's largest value, not the element's own
 * (test/comm/int8-wire.test.ts bounds it that way).
 */
const TOLERANCE: Record<Exclude<WireFormat, 'i8'>, number> = { f32: 1e-6, f16: 2 ** -8, bf16: 2 ** -6 };

class PeerFailure extends Error {
  constructor(readonly peer: string, readonly kind: FailureKind, detail: string) {
    super(`peer ${peer}: ${detail}`);
    this.name = 'PeerFailure';
  }
}

type Reply<T extends FromPeer['type']> = Extract<FromPeer, { type: T }>;

/** One peer process and its one outstanding request (peers answer strictly in order). */
class PeerProcess {
  readonly child: ChildProcess;
  private pending: { expect: FromPeer['type']; resolve: (m: FromPeer) => void; reject: (e: Error) => void; timer: NodeJS.Timeout } | null = null;
  private gone: string | null = null;

  constructor(readonly id: string) {
    // The peer's stdout goes to our stderr: our stdout's last line is the summary.
    this.child = fork(PEER_SCRIPT, [], { cwd: join(here, '..'), execArgv: ['--import', 'tsx'], stdio: ['ignore', 2, 2, 'ipc'] });
    this.child.on('message', (raw: unknown) => this.onMessage(raw));
    this.child.on('exit', (code, signal) => this.onGone(`process exited (${signal ?? `code ${code}`})`));
    this.child.on('error', (e) => this.onGone(`process error: ${e.message}`));
  }

  get alive(): boolean {
    return this.gone === null;
  }

  request<T extends FromPeer['type']>(msg: ToPeer, expect: T, timeoutMs: number): Promise<Reply<T>> {
    if (this.gone !== null) return Promise.reject(new PeerFailure(this.id, 'other', this.gone));
    if (this.pending) return Promise.reject(new Error(`peer ${this.id}: '${msg.type}' sent while '${this.pending.expect}' is awaited (benchmark bug)`));
    return new Promise<Reply<T>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = null;
        reject(new PeerFailure(this.id, 'other', `no '${expect}' within ${timeoutMs} ms after '${msg.type}'`));
      }, timeoutMs);
      this.pending = { expect, resolve: (m) => resolve(m as Reply<T>), reject, timer };
      this.child.send(msg);
    });
  }

  private settle(): NonNullable<PeerProcess['pending']> | null {
    const p = this.pending;
    this.pending = null;
    if (p) clearTimeout(p.timer);
    return p;
  }

  private onMessage(raw: unknown): void {
    const msg = parseFromPeer(raw);
    const p = this.settle();
    if (!p) throw new Error(`peer ${this.id} sent '${msg.type}' unasked: ${JSON.stringify(msg)}`);
    if (msg.type === 'failed') p.reject(new PeerFailure(this.id, msg.kind, msg.message));
    else if (msg.type !== p.expect) p.reject(new Error(`peer ${this.id} answered '${msg.type}', expected '${p.expect}'`));
    else p.resolve(msg);
  }

  private onGone(why: string): void {
    this.gone ??= why;
    this.settle()?.reject(new PeerFailure(this.id, 'other', why));
  }

  /** Asks the peer to leave signaling and exit; kills it if it has not within `timeoutMs`. */
  async stop(timeoutMs: number): Promise<void> {
    if (this.gone !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.send({ type: 'exit' } satisfies ToPeer);
    const t = setTimeout(() => this.kill(), timeoutMs);
    await exited;
    clearTimeout(t);
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

let nextJob = 1000;
let connectRetries = 0;

/** Has every peer form its links for `make(job)`; retries the whole attempt on connect failures. */
async function prepare(procs: PeerProcess[], make: (job: number) => Task): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const task = make(nextJob);
    nextJob += MAX_PEERS; // the star takes one job per leaf
    const settled = await Promise.allSettled(procs.map((p) => p.request({ type: 'prepare', task }, 'prepared', PREPARE_TIMEOUT_MS)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (!failed) return;
    // Peers that did form links close them (those that failed hold nothing), then try again.
    await release(procs);
    const e: unknown = failed.reason;
    if (!(e instanceof PeerFailure) || e.kind !== 'connect-failed' || attempt === CONNECT_ATTEMPTS) throw e;
    connectRetries++;
    console.error(`${task.kind} N=${procs.length}: ${e.message.split('\n')[0]} (retrying with a fresh job)`);
  }
}

async function release(procs: PeerProcess[]): Promise<void> {
  await Promise.all(procs.filter((p) => p.alive).map((p) => p.request({ type: 'release' }, 'released', 10_000)));
}

interface Measured {
  times: number[];
  seconds: number;
  /** CPU seconds of all peer processes together, per timed round. */
  cpuSeconds: number[];
  checks: (ResultCheck | null)[];
}

/** One warm-up round, then `reps` timed rounds; a round's time is the slowest peer's own time. */
async function measure(procs: PeerProcess[], make: (job: number) => Task, reps: number, roundTimeoutMs: number): Promise<Measured> {
  await prepare(procs, make);
  const round = async (warm: boolean) => Promise.all(procs.map((p) => p.request({ type: 'go', warm }, 'done', roundTimeoutMs)));
  try {
    await round(true);
    const times: number[] = [];
    const cpuSeconds: number[] = [];
    let checks: (ResultCheck | null)[] = [];
    for (let r = 0; r < reps; r++) {
      const done = await round(false);
      times.push(Math.max(...done.map((d) => d.seconds)));
      cpuSeconds.push(done.reduce((a, d) => a + d.cpuSeconds, 0));
      checks = done.map((d) => d.check);
    }
    await release(procs);
    return { times, seconds: median(times), cpuSeconds, checks };
  } catch (e) {
    // Keep the first failure as the one reported; a failed release is shown, not hidden.
    await release(procs).catch((r: unknown) => console.error(`(releasing after the failure also failed: ${r instanceof Error ? r.message : String(r)})`));
    throw e;
  }
}

/** Every peer holds the same sum, within `tolerance` of the float64 sum: else the numbers mean nothing. */
function verify(what: string, m: Measured, tolerance: number): number {
  const checks = m.checks.map((c) => {
    if (!c) throw new Error(`${what}: a peer returned no result check`);
    return c;
  });
  if (new Set(checks.map((c) => c.hash)).size !== 1) {
    throw new Error(`${what}: peers ended with different sums (hashes ${checks.map((c) => c.hash.toString(16)).join(', ')})`);
  }
  const worst = Math.max(...checks.map((c) => c.relError));
  if (!(worst <= tolerance)) throw new Error(`${what}: relative error ${worst} against the float64 sum exceeds ${tolerance}`);
  return worst;
}

/** Generous: a wedged round is reported, a slow one is not cut short. */
const roundTimeout = (bytesPerPeer: number) => 15_000 + bytesPerPeer / 1e3; // 1 MB/s floor

interface Case {
  mib: number; n: number; bytes: number;
  /** B, MB/s per link, all N links streaming at once (fastest stream round). */
  linkMBs: number;
  boundS: number; ringS: number; starS: number;
  efficiency: number; vsStar: number;
  ringTimes: number[]; starTimes: number[]; streamTimes: number[];
  /** CPU seconds of all peers per round: with 2 cores, time >= cpu / 2. */
  ringCpu: number[]; starCpu: number[]; streamCpu: number[];
  relError: { ring: number; star: number };
}

async function runCases(all: PeerProcess[], sizes: number[], peers: number[], msgBytes: number): Promise<Case[]> {
  const cases: Case[] = [];
  for (const mib of sizes) {
    for (const n of peers) {
      const procs = all.slice(0, n);
      const ids = procs.map((p) => p.id);
      const bytes = mib * MiB;
      const elems = bytes / 4;
      const warmElems = Math.min(elems, WARM_BYTES / 4);
      const share = (2 * (n - 1)) / n; // of the buffer, carried by every link of the ring
      const reps = mib > 10 ? 2 : 5;
      const timeout = roundTimeout(2 * bytes);
      const seed = 1000 * mib + 10 * n;
      // One more stream round than the others: B comes from the fastest one (see below).
      const s = await measure(
        procs, (job) => ({ kind: 'stream', ids, job, msgBytes, bytes: share * bytes, warmBytes: share * warmElems * 4 }), reps + 1, timeout,
      );
      const r = await measure(procs, (job) => ({ kind: 'ring', ids, job, msgBytes, elems, warmElems, seed, wire: 'f32' }), reps, timeout);
      const st = await measure(procs, (job) => ({ kind: 'star', ids, job, msgBytes, elems, warmElems, seed }), reps, timeout);
      const what = `${mib} MiB N=${n}`;
      const relError = { ring: verify(`ring ${what}`, r, TOLERANCE.f32), star: verify(`star ${what}`, st, TOLERANCE.f32) };
      // Free-running streams vary from round to round far more than the ring (some rounds stall
      // with the cores partly idle), so B is the best a link showed: the bound is the tightest
      // this run supports, and efficiency errs low rather than above 1.
      const B = (share * bytes) / Math.min(...s.times);
      const boundS = (share * bytes) / B;
      const c: Case = {
        mib, n, bytes, linkMBs: B / 1e6, boundS, ringS: r.seconds, starS: st.seconds,
        efficiency: boundS / r.seconds, vsStar: st.seconds / r.seconds,
        ringTimes: r.times, starTimes: st.times, streamTimes: s.times,
        ringCpu: r.cpuSeconds, starCpu: st.cpuSeconds, streamCpu: s.cpuSeconds, relError,
      };
      cases.push(c);
      const cpu = (xs: number[]) => median(xs).toFixed(1);
      console.error(`${what}: cpu-s ring ${cpu(c.ringCpu)} stream ${cpu(c.streamCpu)} star ${cpu(c.starCpu)}`);
      console.error(`${what}: ring ${c.ringS.toFixed(3)} s, bound ${boundS.toFixed(3)} s (B ${c.linkMBs.toFixed(1)} MB/s), star ${c.starS.toFixed(3)} s `
        + `-> efficiency ${c.efficiency.toFixed(3)}, star/ring ${c.vsStar.toFixed(3)}`);
    }
  }
  return cases;
}

export async function main(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  // --only=MIB:N (e.g. --only=100:4) runs just that case, for investigating one.
  const only = args.find((a) => a.startsWith('--only='))?.slice(7).split(':').map(Number);
  if (only && (only.length !== 2 || !only.every(Number.isInteger) || only[1] < 2 || only[1] > MAX_PEERS)) {
    throw new Error(`--only=MIB:N wants e.g. --only=100:4 (N in 2..${MAX_PEERS})`);
  }
  const brief = quick || only !== undefined;
  const sig = await startSignalingServer({ path: '/signal' });
  const server = { host: '127.0.0.1', port: sig.port, path: '/signal' };
  const issued = Array.from({ length: MAX_PEERS }, (_, i) => sig.signaling.issue(`r${i}`));
  const procs = issued.map((it) => new PeerProcess(it.id));
  // Children must not outlive us, whatever way we end.
  const killAll = () => { for (const p of procs) p.kill(); };
  process.on('exit', killAll);
  const onSignal = (s: NodeJS.Signals) => { console.error(`allreduce bench: ${s}, stopping the peer processes`); killAll(); process.exit(130); };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const deadline = setTimeout(() => {
    console.error(`allreduce bench: still running after ${DEADLINE_MS / 60_000} min; stopping (peer processes killed)`);
    killAll();
    process.exit(1);
  }, DEADLINE_MS);
  deadline.unref();
  const t0 = performance.now();

  try {
    await Promise.all(procs.map((p, i) => p.request({ type: 'open', ...issued[i], server }, 'opened', 20_000)));
    const msgBytes = envInt('VT_MSG', DEFAULT_MESSAGE_BYTES);

    // 1. Message size: 4 MiB, N = 3.
    const sweep: { msgBytes: number; seconds: number }[] = [];
    if (!brief) {
      const ids = procs.slice(0, 3).map((p) => p.id);
      for (const m of [16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10]) {
        const r = await measure(
          procs.slice(0, 3), (job) => ({ kind: 'ring', ids, job, msgBytes: m, elems: MiB, warmElems: MiB, seed: 7, wire: 'f32' }), 3, roundTimeout(8 * MiB),
        );
        verify(`sweep ${m >> 10} KiB`, r, TOLERANCE.f32);
        sweep.push({ msgBytes: m, seconds: r.seconds });
        console.error(`message ${m >> 10} KiB: ${r.seconds.toFixed(3)} s`);
      }
    }

    // 2. Sizes x N: ring vs bound vs star.
    const cases = only ? await runCases(procs, [only[0]], [only[1]], msgBytes) : await runCases(procs, quick ? [4] : [4, 100], [2, 3, 4], msgBytes);

    // 3. Half precision on the wire: 4 MiB, N = 4.
    const wires: { wire: WireFormat; seconds: number; relError: number }[] = [];
    if (!brief) {
      const ids = procs.map((p) => p.id);
      for (const wire of ['f32', 'f16', 'bf16'] as const) {
        const r = await measure(procs, (job) => ({ kind: 'ring', ids, job, msgBytes, elems: MiB, warmElems: MiB, seed: 50, wire }), 3, roundTimeout(8 * MiB));
        wires.push({ wire, seconds: r.seconds, relError: verify(`wire ${wire}`, r, TOLERANCE[wire]) });
        console.error(JSON.stringify(wires.at(-1)));
      }
    }

    await Promise.all(procs.map((p) => p.stop(5000)));
    const largest = cases[cases.length - 1];
    const ringBeatsStar = cases.filter((c) => c.n >= 3).every((c) => c.vsStar > 1);
    const result = {
      setup: {
        peers: 'one OS process per peer', cores: cpus().length, messageBytes: msgBytes, warmBytes: WARM_BYTES, connectRetries,
        seconds: (performance.now() - t0) / 1000,
      },
      messageSweep: sweep, cases, wires, largest, ringBeatsStarForNge3: ringBeatsStar,
    };
    writeFileEnsuringDir(join(here, 'results', 'allreduce.json'), JSON.stringify(result, null, 2));
    writeFileEnsuringDir(join(here, 'results', 'allreduce.svg'), barChartSvg({
      title: 'Ring all-reduce on loopback WebRTC (one Node process per peer, 2 cores)',
      yLabel: 'seconds',
      categories: cases.map((c) => `${c.mib} MiB, N=${c.n}`),
      series: [
        { name: 'ring (measured)', values: cases.map((c) => c.ringS) },
        { name: 'bound 2(N-1)/N·bytes/B', values: cases.map((c) => c.boundS) },
        { name: 'star baseline', values: cases.map((c) => c.starS) },
      ],
    }));
    console.log(JSON.stringify({
      bench: 'allreduce', efficiency: +largest.efficiency.toFixed(3), vs_star: +largest.vsStar.toFixed(3),
      case: `${largest.mib}MiB N=${largest.n}`, faster_than_star_n_ge_3: ringBeatsStar,
    }));
  } finally {
    clearTimeout(deadline);
    killAll();
    await sig.close();
  }
}
