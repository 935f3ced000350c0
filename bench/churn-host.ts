// A host process of the churn benchmark (bench/churn.ts): up to ~10 simulated volunteers in one
// Node process, each the REAL client (src/client/volunteer.ts runVolunteer) with its own
// session WebSocket (`ws`), PeerJS signaling, WebRTC (node-datachannel) and its own CPU engine
// (WasmEngine) and model state. Only the process is shared, to keep 50 peers light.
//
// Commands come from the parent over Node IPC (bench/churn-protocol.ts): `start` a volunteer,
// `leave` (its abort signal: a normal leave), `quit`. The parent also SIGKILLs a whole host now
// and then: a crash of all its volunteers mid-step. Volunteer log lines go to stderr as
// `<name>: <line>`; reports (joined, steps, exits, memory) go back over IPC.
//
//   node --import tsx --import ./scripts/raw-loader.mjs bench/churn-host.ts   (with an IPC channel)
import { WebSocket } from 'ws';
import { runVolunteer, type SocketCtor, type VolunteerEvent } from '../src/client/volunteer.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../src/comm/node.ts';
import { nodeDecoder, nodeGunzip } from '../src/data/decode-node.ts';
import { WasmEngine } from '../src/wasm/engine.ts';
import { decodeCommand, type HostCommand, type HostReport } from './churn-protocol.ts';

/** A neighbour silent this long is dead (the default, 120 s, is for slow GPUs; these are tiny). */
const DEAD_AFTER_MS = 15_000;
/** How long a volunteer keeps trying to (re)join while the coordinator is away. */
const REJOIN_FOR_MS = 30_000;
const MEMORY_EVERY_MS = 5_000;
const QUIT_GRACE_MS = 10_000;

interface Running { stop: AbortController; exited: Promise<void> }

function report(r: HostReport): void {
  if (process.connected) process.send!(r);
}

function line(name: string, text: string): void {
  process.stderr.write(`${name}: ${text}\n`);
}

async function main(): Promise<void> {
  if (!process.send) throw new Error('bench/churn-host.ts runs as a child of bench/churn.ts, with an IPC channel');
  const Peer = await loadNodePeer();
  // Compile (in Node: build, when stale) the kernels before taking volunteers, so the parent's
  // schedule does not count a build as part of a volunteer's start.
  (await WasmEngine.create({ initialMiB: 1 })).destroy();
  const running = new Map<string, Running>();

  const start = (name: string, url: string): void => {
    if (running.has(name)) return line(name, 'already running: start ignored');
    const stop = new AbortController();
    const onEvent = (e: VolunteerEvent) => {
      if (e.type === 'joined') report({ type: 'joined', name, peerId: e.peerId });
      else if (e.type === 'step') report({ type: 'step', name, step: e.step, ringSize: e.ringSize });
      else if (e.type === 'left') line(name, `left the session: ${e.reason}`);
    };
    const exited = (async () => {
      let engine: WasmEngine | null = null;
      try {
        engine = await WasmEngine.create({ initialMiB: 4 });
        const exit = await runVolunteer(
          { engine, Peer, rtcConfig: NODE_RTC_CONFIG, WebSocket: WebSocket as unknown as SocketCtor, decoder: nodeDecoder, gunzip: nodeGunzip },
          { url, name, log: (l) => line(name, l), onEvent, rejoinForMs: REJOIN_FOR_MS, signal: stop.signal, deadAfterMs: DEAD_AFTER_MS },
        );
        report({ type: 'exit', name, reason: exit.reason, step: exit.step });
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        line(name, `failed: ${e instanceof Error ? e.stack ?? why : why}`);
        report({ type: 'exit', name, reason: 'error', step: null, error: why.slice(0, 500) });
      } finally {
        running.delete(name);
        engine?.destroy();
      }
    })();
    running.set(name, { stop, exited });
  };

  const quit = async (): Promise<never> => {
    if (running.size) process.stderr.write(`churn-host: quitting with ${[...running.keys()].join(' ')} still running\n`);
    for (const r of running.values()) r.stop.abort();
    const all = Promise.all([...running.values()].map((r) => r.exited));
    await Promise.race([all, new Promise((r) => setTimeout(r, QUIT_GRACE_MS))]);
    process.exit(0);
  };

  process.on('message', (m: unknown) => {
    let c: HostCommand;
    try {
      c = decodeCommand(m);
    } catch (e) {
      process.stderr.write(`churn-host: ${e instanceof Error ? e.message : String(e)}\n`);
      return;
    }
    if (c.type === 'start') start(c.name, c.url);
    else if (c.type === 'leave') {
      const r = running.get(c.name);
      line(c.name, r ? 'leaving (abort signal)' : 'asked to leave, but it is not running');
      r?.stop.abort();
    }
    else void quit();
  });
  // The parent is gone: nobody will tell us to stop, so stop now.
  process.on('disconnect', () => void quit());
  const memory = setInterval(() => {
    const m = process.memoryUsage();
    report({ type: 'memory', rssMb: m.rss / 2 ** 20, heapMb: m.heapUsed / 2 ** 20, volunteers: running.size });
  }, MEMORY_EVERY_MS);
  memory.unref();
  report({ type: 'ready', pid: process.pid });
}

main().catch((e: unknown) => {
  process.stderr.write(`churn-host: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(1);
});
