// The headless volunteer for lab desktops and CI: `npm run volunteer -- --url http://host:port`.
// The same client as the page's worker (src/client/volunteer.ts) on Node: WebGPU from the
// 'webgpu' package (Dawn) or the wasm SIMD engine (whichever is faster here, or --backend),
// WebRTC from node-datachannel, the session socket from 'ws'. This file reads the command line
// and decides whether this process is the supervising parent (supervise.ts) or the volunteer;
// only the volunteer loads the engines and the client (node-run.ts), so the parent starts in a
// third of the time and holds little memory.
import { CHILD_ENV, FOLLOW_STARTER_ENV, followParent, followStarter, supervise } from './supervise.ts';
import { ADVERSARY_KINDS, type AdversaryKind } from '../trust/adversary.ts';
import { freezeAt } from './freeze.ts';
import { isIP } from 'node:net';
import { ArgError, Args, runCli } from '../cli/args.ts';
import { checkReachable, trustEnv, trustedCa } from './node-trust.ts';
import { BACKEND_PREFERENCES, type BackendPreference } from '../backend/engine.ts';
import { stallReportMs } from './stall-watch.ts';
import { DONOR_NAME } from '../protocol/messages.ts';

export const VOLUNTEER_USAGE = `usage: npm run volunteer -- --url http://HOST:PORT [options]
  --url URL          the coordinator (the address npm start prints)
  --token T          join token of a private job
  --name NAME        shown on the dashboard (default: the host name)
  --rejoin-for S     keep trying to (re)join for S seconds when the coordinator is away (default 600)
  --backend B        compute with auto (default: measure both, keep the faster), webgpu or wasm
  --threads N        wasm threads (default 1; a desktop that does nothing else: its core count)
  --no-tune          skip the WebGPU GEMM autotune at start (faster start, maybe slower steps)
  --ca FILE          trust this CA certificate (the coordinator's ca.crt) for its https:// address
  --ca-sha256 FP     fetch the coordinator's CA and trust it if its SHA-256 is FP (npm start prints it)
  --bind ADDR        WebRTC only on this local address (default: every interface, or
                     127.0.0.1 when the coordinator is on loopback; the address facing the
                     other volunteers when a machine has several)
  --direct-port N    take direct ring links from other Node volunteers (TLS over TCP, far
                     cheaper than WebRTC) on TCP port N (default 0: any free port)
  --no-direct        WebRTC links only (no listening port)
  --cache-dir DIR    keep the shards it fetched in DIR (survives restarts; least recently
                     used evicted past the budget); default: none, every run fetches again
  --cache-gb N       the cache's budget in GB (default 4)
  --memory-cache-mb N  parsed shards kept in memory, in MiB (default 512: all of CIFAR-10 or
                     MNIST; for ImageNet, what this machine can spare)
  --no-prefetch      do not load the next step's images while this step computes
  --memory-mb N      engine memory it may use, in MiB (default: wasm its 4 GiB, WebGPU 2 GiB); a
                     slice larger than fits runs in micro-batches (the job's BN groups whole)
  --micro-batch N    compute at most N images at once, whatever fits
  --throttle F       use about F (0.05 to 1) of this device: idle after each batch in proportion
                     (default 1; the coordinator gives a throttled peer a smaller share)
  --straggle MU      benchmarks: each step computes 1 + X times slower, X exponential of mean MU
  --quiet            only errors and the final line`;

export async function volunteerMain(argv: readonly string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${VOLUNTEER_USAGE}\n`);
    return;
  }
  const a = new Args(argv);
  const url = a.str('url', '');
  const token = a.str('token', '');
  const { hostname } = await import('node:os');
  const name = a.str('name', hostname().replace(/[^A-Za-z0-9_-]/g, '-').replace(/^[-_]+/, '').slice(0, 40) || 'node');
  const rejoinFor = a.int('rejoin-for', 600);
  const backend = a.str('backend', 'auto');
  const threads = a.int('threads', 1, 1);
  const noTune = a.flag('no-tune');
  const quiet = a.flag('quiet');
  const bind = a.str('bind', '');
  const noDirect = a.flag('no-direct');
  const directPort = a.int('direct-port', 0, 0);
  const caFile = a.str('ca', '');
  const caSha256 = a.str('ca-sha256', '');
  const cacheDir = a.str('cache-dir', '');
  const cacheGb = a.num('cache-gb', 4, (v) => v > 0, 'a number of GB > 0');
  const memoryMb = a.num('memory-cache-mb', 512, (v) => v >= 1, 'a number of MiB >= 1');
  const noPrefetch = a.flag('no-prefetch');
  const engineMb = a.num('memory-mb', 0, (v) => v >= 1, 'a number of MiB >= 1');
  const microBatch = a.int('micro-batch', 0, 1);
  const share = a.num('throttle', 1, (v) => v >= 0.05 && v <= 1, 'a number in [0.05, 1]');
  const straggle = a.num('straggle', 0, (v) => v >= 0 && v <= 10, 'a number in [0, 10]');
  // The attack tests and bench (issue 46): not in the usage, as no donor should want it.
  const adversaryArg = a.str('adversary', '');
  const collude = a.flag('collude');
  // The fault tests only (freeze.ts): hang at the first log line matching this, to be killed there.
  const freezeArg = a.str('freeze-at', '');
  a.rejectUnknown(VOLUNTEER_USAGE);
  let freeze: ((line: string) => void) | null = null;
  try {
    freeze = freezeArg ? freezeAt(new RegExp(freezeArg)) : null;
  } catch (e) {
    throw new ArgError(`--freeze-at must be a regular expression over the volunteer's log lines; "${freezeArg}": ${(e as Error).message}`);
  }
  if (collude && !adversaryArg) throw new ArgError('--collude goes with --adversary KIND');
  if (adversaryArg && !(ADVERSARY_KINDS as readonly string[]).includes(adversaryArg)) {
    throw new ArgError(`--adversary must be one of ${ADVERSARY_KINDS.join(', ')}; got "${adversaryArg.slice(0, 40)}"`);
  }
  const adversary = adversaryArg ? (adversaryArg as AdversaryKind) : undefined;
  if (directPort > 65_535) throw new ArgError(`--direct-port must be a TCP port (0 for any free one); got ${directPort}`);
  if (bind && isIP(bind) === 0) throw new ArgError(`--bind must be an IP address of this machine; got "${bind}"`);
  if (!DONOR_NAME.test(name)) {
    const rule = "1 to 40 letters, digits, spaces and . _ ' - (starting with a letter or digit)";
    throw new ArgError(`--name must be ${rule}: the job's credit board shows it; got "${name.slice(0, 60)}"`);
  }
  // A coordinator on loopback runs a job of this machine only: its peers meet on loopback too.
  const rtcBind = bind || (/^https?:\/\/(127\.[\d.]+|localhost|\[::1\])(:\d+)?(\/|$)/.test(url) ? '127.0.0.1' : undefined);
  if (!(BACKEND_PREFERENCES as readonly string[]).includes(backend)) {
    throw new ArgError(`--backend must be one of ${BACKEND_PREFERENCES.join(', ')}; got "${backend}"\n${VOLUNTEER_USAGE}`);
  }
  if (!/^https?:\/\/[^/]+/.test(url)) {
    throw new ArgError(`--url must be the coordinator's address, e.g. http://127.0.0.1:8080; got "${url}"\n${VOLUNTEER_USAGE}`);
  }

  const log = (line: string) => { if (!quiet) process.stderr.write(`${line}\n`); };
  // A main thread that stops running (a native call that never returns) is reported with every thread's stack.
  const stallMs = stallReportMs();
  // The volunteer runs as a child (supervise.ts): started trusting the coordinator's own CA
  // (node-trust.ts), and again when the watchdog ends it of a deadlock inside node-datachannel.
  // The child starts with what its parent resolved (NODE_EXTRA_CA_CERTS): it does not fetch or write the CA again.
  // npm start's own volunteers end with it (FOLLOW_STARTER_ENV): the parent here, which ends its child.
  const follow = process.env[FOLLOW_STARTER_ENV] === '1';
  if (process.env[CHILD_ENV] === '1') followParent();
  else {
    const trust = await trustEnv(await trustedCa(url, caFile, caSha256));
    if (stallMs > 0 || Object.keys(trust).length > 0) {
      process.exit(await supervise({
        command: process.execPath, args: [...process.execArgv, ...process.argv.slice(1)], env: trust, restart: stallMs > 0, log, followStarter: follow,
      }));
    }
    if (follow) followStarter();
  }
  await checkReachable(url);
  const { runNodeVolunteer } = await import('./node-run.ts');
  // Only the process that trains freezes (a supervising parent above it never does).
  const runLog = freeze ? (line: string) => { log(line); freeze(line); } : log;
  await runNodeVolunteer({
    url, token, name, rejoinFor, backend: backend as BackendPreference, threads, noTune, log: runLog, quiet, rtcBind, noDirect, directPort, cacheDir,
    cacheGb, memoryMb, noPrefetch, engineMb, microBatch, share, straggle, adversary, collude, stallMs,
  });
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, ''))) runCli(() => volunteerMain(process.argv.slice(2)));
