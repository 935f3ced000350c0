// One peer of `npm run bench -- network`, run inside a test-bed host (its own network
// namespace). It speaks JSON lines: commands on stdin from bench/network.ts, answers on stdout.
// It binds WebRTC to every interface (as real volunteers do) and meets its ring neighbours
// through the signaling server on the bench's `coord` host. With `listen-direct` first and a
// secret at `open`, rings whose `routes` name its successor use a direct link (TLS over TCP:
// src/comm/direct-peer.ts) to it, as Node volunteers do; without routes, WebRTC.
import { createInterface } from 'node:readline';
import { allReduceSum, openEndpoint, type PeerEndpoint, type Ring, type WireFormat } from '../src/comm/index.ts';
import { loadNodePeer, nodeRtcConfig } from '../src/comm/node.ts';
import { DirectListener, DirectPeer } from '../src/comm/direct-peer.ts';
import type { DirectRoutes } from '../src/protocol/messages.ts';

export type NetToPeer =
  | { type: 'listen-direct' }
  | { type: 'open'; id: string; token: string; server: { host: string; port: number; path: string }; directSecret?: string }
  | { type: 'ring'; ids: string[]; job: number; generation: number; routes?: DirectRoutes }
  | { type: 'go'; elems: number; step: number; wire: WireFormat }
  | { type: 'close-ring' }
  | { type: 'exit' };
export type NetFromPeer =
  | { type: 'listening'; port: number }
  | { type: 'opened' }
  | { type: 'formed'; ms: number; route: string | null }
  | { type: 'done'; ms: number; first: number }
  | { type: 'closed' }
  | { type: 'failed'; message: string };

const say = (m: NetFromPeer): void => { process.stdout.write(`${JSON.stringify(m)}\n`); };
const sctpEnv = process.env.VT_SCTP ? (JSON.parse(process.env.VT_SCTP) as import("../src/comm/node.ts").SctpSettings) : undefined;
const Peer = await loadNodePeer(sctpEnv);
let endpoint: PeerEndpoint | null = null;
let ring: Ring | null = null;
let listener: DirectListener | null = null;

async function handle(m: NetToPeer): Promise<void> {
  switch (m.type) {
    case 'listen-direct':
      listener = await DirectListener.open();
      return say({ type: 'listening', port: listener.port });
    case 'open': {
      const { directSecret } = m;
      endpoint = await openEndpoint({
        Peer, id: m.id, token: m.token, server: m.server,
        rtcConfig: { ...nodeRtcConfig([]), ...(process.env.VT_MTU ? { mtu: Number(process.env.VT_MTU) } : {}) } as RTCConfiguration,
        ...(listener && directSecret ? { wrap: (p) => new DirectPeer(p, listener!, directSecret) } : {}),
      });
      return say({ type: 'opened' });
    }
    case 'ring': {
      if (!endpoint) throw new Error('ring before open');
      if (m.routes) endpoint.learnRoutes(m.routes);
      const t0 = performance.now();
      ring = await endpoint.formRing({
        ids: m.ids, job: m.job, generation: m.generation, connectTimeoutMs: 20_000, settings: { deadAfterMs: 60_000, stallTimeoutMs: 120_000 },
      });
      const ms = performance.now() - t0;
      return say({ type: 'formed', ms, route: (await ring.next?.route?.()) ?? null });
    }
    case 'go': {
      if (!ring) throw new Error('go before ring');
      // Every peer adds rank+1 everywhere: the sum is known, so a wrong result is caught.
      const grad = new Float32Array(m.elems).fill(ring.rank + 1);
      const t0 = performance.now();
      await allReduceSum(grad, { ring, step: m.step, wire: m.wire });
      const ms = performance.now() - t0;
      const want = (ring.size * (ring.size + 1)) / 2;
      if (grad[0] !== want || grad[m.elems - 1] !== want) throw new Error(`wrong sum ${grad[0]} (want ${want})`);
      return say({ type: 'done', ms, first: grad[0]! });
    }
    case 'close-ring':
      ring?.close();
      ring = null;
      return say({ type: 'closed' });
    case 'exit':
      endpoint?.destroy();
      process.exit(0);
  }
}

let chain = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  chain = chain.then(() => handle(JSON.parse(line) as NetToPeer))
    .catch((e: unknown) => say({ type: 'failed', message: e instanceof Error ? e.message : String(e) }));
});

