// One peer of `npm run bench -- transport`, inside a test-bed host (its own network namespace),
// pinned to one core by the bench. JSON lines: commands on stdin, answers on stdout. It moves
// bytes one way over the transports the bench compares and reports its own time and CPU
// (process.cpuUsage: every thread of the process, node-datachannel's native ones included):
//   - kernel TCP (Node `net`, 64 KiB writes with back-pressure), the physical anchor;
//   - the links a Node volunteer opens (src/comm: PeerJS signaling, the Link interface), carrying
//     ring frames (bench/transport-stream.ts): WebRTC (node-datachannel), or, given a secret at
//     `open` and routes at `links`, a direct link (TLS over TCP, src/comm/direct-peer.ts).
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { openEndpoint, type PeerEndpoint } from '../src/comm/index.ts';
import { loadNodePeer, nodeRtcConfig } from '../src/comm/node.ts';
import { LinkStream } from './transport-stream.ts';
import { DirectListener, DirectPeer } from '../src/comm/direct-peer.ts';
import type { DirectRoutes } from '../src/protocol/messages.ts';

export type TransportToPeer =
  | { type: 'tcp-listen' }
  | { type: 'tcp-recv'; bytes: number }
  | { type: 'tcp-send'; host: string; port: number; bytes: number; msg: number }
  | { type: 'listen-direct' }
  | { type: 'open'; id: string; token: string; server: { host: string; port: number; path: string }; directSecret?: string }
  | { type: 'links'; ids: string[]; job: number; routes?: DirectRoutes }
  | { type: 'dc-recv'; bytes: number }
  | { type: 'dc-send'; bytes: number; msg: number }
  | { type: 'exit' };
export type TransportFromPeer =
  | { type: 'listening'; port: number }
  | { type: 'ready' }
  | { type: 'moved'; bytes: number; ms: number; cpuS: number }
  | { type: 'failed'; message: string };

const say = (m: TransportFromPeer): void => { process.stdout.write(`${JSON.stringify(m)}\n`); };
const cpuS = (since: NodeJS.CpuUsage) => { const u = process.cpuUsage(since); return (u.user + u.system) / 1e6; };

let server: Server | null = null;
let accepted: Promise<Socket> | null = null;
let endpoint: PeerEndpoint | null = null;
let stream: LinkStream | null = null;
let listener: DirectListener | null = null;

/** Receives `bytes` on the accepted socket; time from the first byte to the last. */
async function tcpRecv(bytes: number): Promise<TransportFromPeer> {
  if (!accepted) throw new Error('tcp-recv before tcp-listen');
  const sock = await accepted;
  return new Promise((resolve) => {
    let got = 0, t0 = 0, c0 = process.cpuUsage();
    sock.on('data', (b: Buffer) => {
      if (got === 0) { t0 = performance.now(); c0 = process.cpuUsage(); }
      got += b.length;
      if (got >= bytes) resolve({ type: 'moved', bytes: got, ms: performance.now() - t0, cpuS: cpuS(c0) });
    });
  });
}

async function tcpSend(host: string, port: number, bytes: number, msg: number): Promise<TransportFromPeer> {
  const sock = connect({ host, port });
  await new Promise<void>((ok, fail) => { sock.once('connect', ok); sock.once('error', fail); });
  sock.setNoDelay(true);
  const c0 = process.cpuUsage(), t0 = performance.now();
  const chunk = Buffer.alloc(msg, 7);
  for (let sent = 0; sent < bytes; sent += msg) {
    if (!sock.write(chunk)) await new Promise((ok) => sock.once('drain', ok));
  }
  const ms = performance.now() - t0;
  return { type: 'moved', bytes, ms, cpuS: cpuS(c0) };
}

async function dcRecv(bytes: number): Promise<TransportFromPeer> {
  if (!stream) throw new Error('dc-recv before links');
  let c0 = process.cpuUsage();
  const r = await stream.recv(bytes, () => { c0 = process.cpuUsage(); });
  return { type: 'moved', ...r, cpuS: cpuS(c0) };
}

async function dcSend(bytes: number, msg: number): Promise<TransportFromPeer> {
  if (!stream) throw new Error('dc-send before links');
  const c0 = process.cpuUsage();
  const r = await stream.send(bytes, msg);
  return { type: 'moved', bytes, ms: r.ms, cpuS: cpuS(c0) };
}

async function handle(m: TransportToPeer): Promise<TransportFromPeer | null> {
  switch (m.type) {
    case 'tcp-listen':
      server = createServer();
      accepted = new Promise((ok) => server!.once('connection', ok));
      await new Promise<void>((ok) => server!.listen(0, '0.0.0.0', ok));
      return { type: 'listening', port: (server.address() as { port: number }).port };
    case 'tcp-recv': return tcpRecv(m.bytes);
    case 'tcp-send': return tcpSend(m.host, m.port, m.bytes, m.msg);
    case 'listen-direct':
      listener = await DirectListener.open();
      return { type: 'listening', port: listener.port };
    case 'open': {
      const Peer = await loadNodePeer();
      // VT_MTU: libdatachannel's path MTU (an experiment knob, as in the allreduce bench; unset: its default).
      const mtu = process.env.VT_MTU ? { mtu: Number(process.env.VT_MTU) } : {};
      const { directSecret } = m;
      endpoint = await openEndpoint({
        Peer, id: m.id, token: m.token, server: m.server, rtcConfig: { ...nodeRtcConfig([]), ...mtu } as RTCConfiguration,
        ...(listener && directSecret ? { wrap: (p) => new DirectPeer(p, listener!, directSecret) } : {}),
      });
      return { type: 'ready' };
    }
    case 'links':
      if (!endpoint) throw new Error('links before open');
      if (m.routes) endpoint.learnRoutes(m.routes);
      stream = new LinkStream(await endpoint.connectLinks({ ids: m.ids, job: m.job, generation: 1, connectTimeoutMs: 20_000 }));
      return { type: 'ready' };
    case 'dc-recv': return dcRecv(m.bytes);
    case 'dc-send': return dcSend(m.bytes, m.msg);
    case 'exit':
      endpoint?.destroy();
      server?.close();
      process.exit(0);
  }
}

// Commands run as they come (a receive is armed, then the sender's command arrives in the other
// process); each answers once.
createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  handle(JSON.parse(line) as TransportToPeer)
    .then((r) => { if (r) say(r); })
    .catch((e: unknown) => say({ type: 'failed', message: e instanceof Error ? e.message : String(e) }));
});
