// The volunteer itself on Node, once node-cli.ts has read its command line and decided that this
// process computes (not the supervising parent): the engine (Dawn WebGPU or wasm), the WebRTC
// peer (node-datachannel), the listener for direct ring links, the shard cache, then the client
// (volunteer.ts) until the job ends or the volunteer is told to stop.
import { resolve } from 'node:path';
import { networkInterfaces } from 'node:os';
import { WebSocket } from 'ws';
import { ArgError } from '../cli/args.ts';
import { DiskShardCache } from '../data/disk-cache.ts';
import type { ShardSource } from '../data/source.ts';
import { loadNodePeer, nodeRtcConfig } from '../comm/node.ts';
import { DirectListener, DirectPeer } from '../comm/direct-peer.ts';
import { gatherCandidates, type GatherPcCtor } from '../comm/ice-check.ts';
import { nodeDecoder, nodeGunzip } from '../data/decode-node.ts';
import type { AnyEngine, BackendPreference } from '../backend/engine.ts';
import { WebGpuEngine } from '../backend/webgpu.ts';
import { getDevice } from '../gpu/device.ts';
import { autotuneGemm } from '../ops/gemm-tune.ts';
import type { AdversaryKind } from '../trust/adversary.ts';
import { WasmEngine } from '../wasm/engine.ts';
import { chooseEngine } from './backend-choice.ts';
import { runVolunteer, type SocketCtor, type VolunteerEvent } from './volunteer.ts';
import { watchStalls } from './stall-watch.ts';

/** What node-cli.ts read from the command line (its usage says what each means). */
export interface NodeVolunteerOptions {
  url: string;
  token: string;
  name: string;
  /** Seconds. */
  rejoinFor: number;
  backend: BackendPreference;
  threads: number;
  noTune: boolean;
  log: (line: string) => void;
  quiet: boolean;
  /** The local address WebRTC and direct links use (undefined: every interface). */
  rtcBind: string | undefined;
  noDirect: boolean;
  directPort: number;
  cacheDir: string;
  cacheGb: number;
  /** --memory-cache-mb. */
  memoryMb: number;
  noPrefetch: boolean;
  /** --memory-mb (0: the engine's default budget). */
  engineMb: number;
  /** 0: whatever fits. */
  microBatch: number;
  /** --throttle. */
  share: number;
  straggle: number;
  adversary: AdversaryKind | undefined;
  collude: boolean;
  /** The stall watchdog's report time (0: off). */
  stallMs: number;
}

/** Runs the volunteer until its job ends or it is told to stop; writes its exit line on stdout. */
export async function runNodeVolunteer(o: NodeVolunteerOptions): Promise<void> {
  const {
    url, token, name, rejoinFor, backend, threads, noTune, log, quiet, rtcBind, noDirect, directPort, cacheDir, cacheGb, memoryMb, noPrefetch,
    engineMb, microBatch, share, straggle, adversary, collude, stallMs,
  } = o;
  const watch = stallMs > 0 ? watchStalls(stallMs) : null;
  const { engine, choice } = await chooseEngine(backend, {
    webgpu: async (): Promise<AnyEngine> => {
      const gpu = await getDevice();
      if (!noTune) await autotuneGemm(gpu);
      return new WebGpuEngine(gpu);
    },
    wasm: (): Promise<AnyEngine> => WasmEngine.create({ threads }),
  });
  log(`volunteer: computing with ${choice.chosen} (${engine.info.description}): ${choice.reason}`);
  const Peer = await loadNodePeer();
  const direct = noDirect ? null : await openDirect(directPort, rtcBind);
  if (direct) log(`volunteer: direct ring links from other Node volunteers on TCP port ${direct.port}${rtcBind ? ` of ${rtcBind}` : ''}`);
  const stop = new AbortController();
  const onSignal = () => {
    log('volunteer: leaving after this message');
    stop.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const onEvent = (e: VolunteerEvent) => {
    if (quiet) return;
    if (e.type === 'step') {
      log(`volunteer: step ${e.step} ring ${e.ringSize} images ${e.images} loss ${e.loss === null ? '-' : e.loss.toFixed(4)} `
        + `compute ${e.computeMs.toFixed(0)} ms all-reduce ${e.commMs.toFixed(0)} ms data wait ${e.dataMs.toFixed(0)} ms `
        + `fetched ${(e.fetchedBytes / 1e6).toFixed(1)} MB`);
    } else if (e.type === 'state') log(`volunteer: loaded step ${e.step} from the ${e.source}`);
  };
  try {
    const exit = await runVolunteer(
      {
        engine, Peer, rtcConfig: nodeRtcConfig([], rtcBind), rtcConfigFor: (servers) => nodeRtcConfig(servers, rtcBind),
        // loadNodePeer set node-datachannel's RTCPeerConnection as the global one.
        iceCheck: (config) => gatherCandidates((globalThis as unknown as { RTCPeerConnection: GatherPcCtor }).RTCPeerConnection, config),
        WebSocket: WebSocket as unknown as SocketCtor, decoder: nodeDecoder, gunzip: nodeGunzip,
        ...(direct ? {
          direct: { port: direct.port, addresses: listenAddresses(rtcBind), wrap: (peer, secret, say) => new DirectPeer(peer, direct, secret, say) },
        } : {}),
        ...(cacheDir ? {
          cacheShards: (source: ShardSource, dataset: string) => new DiskShardCache(resolve(cacheDir), cacheGb * 1e9, dataset).shards(source),
        } : {}),
      },
      {
        url, token: token || undefined, name, log, onEvent, rejoinForMs: rejoinFor * 1000, signal: stop.signal,
        memoryCacheBytes: Math.round(memoryMb * 2 ** 20), prefetch: !noPrefetch, ...(share < 1 ? { throttle: () => share } : {}),
        ...(straggle > 0 ? { straggle } : {}), ...(adversary ? { adversary } : {}), ...(collude ? { collude } : {}),
        ...(engineMb > 0 ? { memoryBytes: Math.round(engineMb * 2 ** 20) } : {}), ...(microBatch > 0 ? { microBatch } : {}),
      },
    );
    process.stdout.write(`${JSON.stringify({ volunteer: 'exit', reason: exit.reason, step: exit.step })}\n`);
  } finally {
    watch?.stop();
    engine.destroy();
    await direct?.close();
  }
}

/** The addresses a listener on `host` (none: every interface) answers on: what the coordinator compares its join's source with. */
function listenAddresses(host: string | undefined): string[] {
  if (host) return [host];
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address)).slice(0, 32);
}

/** The listener for direct ring links, or a clear error when the port asked for is taken. */
async function openDirect(port: number, host: string | undefined): Promise<DirectListener> {
  try {
    return await DirectListener.open({ port, ...(host ? { host } : {}) });
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new ArgError(`cannot listen for direct links on TCP port ${port}${host ? ` of ${host}` : ''} (${why}): `
      + 'pass another --direct-port, 0 for any free one, or --no-direct');
  }
}
