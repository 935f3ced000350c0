// The volunteer's Web Worker: WebGPU, WebRTC (PeerJS), the session socket and IndexedDB all
// live here, so the page never freezes. The page talks to it through comlink (worker-api.ts).
import { expose } from 'comlink';
import { relayPeerClass } from '../comm/relay.ts';
import { browserDecoder } from '../data/decode-browser.ts';
import { VolunteerCache } from '../data/idb-cache.ts';
import { getDevice } from '../gpu/device.ts';
import type { Gpu } from '../gpu/runtime.ts';
import { gemm } from '../ops/gemm.ts';
import { autotuneGemm } from '../ops/gemm-tune.ts';
import { runVolunteer, type SocketCtor } from './volunteer.ts';
import type { DeviceReport, StartOptions, VolunteerStatus, VolunteerWorkerApi } from './worker-api.ts';

let gpu: Gpu | null = null;
let report: DeviceReport | null = null;
let cache: VolunteerCache | null = null;
let running: { stop: AbortController; done: Promise<void> } | null = null;
let share = 1;

async function device(): Promise<{ gpu: Gpu; report: DeviceReport }> {
  if (gpu && report) return { gpu, report };
  const g = await getDevice();
  const tune = await autotuneGemm(g);
  const n = 512;
  const a = g.zeros([n, n]), b = g.zeros([n, n]), c = g.empty([n, n]);
  gemm(g, a, b, c);
  await g.sync();
  const t0 = performance.now();
  for (let i = 0; i < 3; i++) gemm(g, a, b, c);
  await g.sync();
  const ms = (performance.now() - t0) / 3;
  g.release(a, b, c);
  gpu = g;
  report = { adapter: g.info.description || 'unknown adapter', software: g.info.software, gflops: (2 * n ** 3) / ms / 1e6, kernel: tune.config.entry };
  return { gpu: g, report };
}

const api: VolunteerWorkerApi = {
  async probe() {
    return (await device()).report;
  },

  async start(o: StartOptions, rtc: MessagePort, onStatus: (s: VolunteerStatus) => void) {
    if (running) return;
    share = o.throttle;
    const { gpu: g } = await device();
    cache ??= await VolunteerCache.open();
    const c = cache;
    const status: VolunteerStatus = { state: 'joining', message: 'joining the job…', peerId: null, step: null, ringSize: 0, loss: null, imagesPerSec: null, cache: c.stats };
    let over = false;
    const tell = (patch: Partial<VolunteerStatus>, last = false) => {
      if (over) return; // nothing after the final word (paused, done, error)
      over = last;
      Object.assign(status, patch, { cache: { ...c.stats } });
      onStatus({ ...status });
    };
    tell({});
    const stop = new AbortController();
    // WebRTC lives on the page (no RTCPeerConnection in workers): its peers are driven over `rtc`.
    const Peer = relayPeerClass(rtc);
    const done = runVolunteer(
      {
        gpu: g, Peer, rtcConfig: { iceServers: [] }, WebSocket: WebSocket as unknown as SocketCtor, decoder: browserDecoder,
        cacheShards: (s) => c.shards(s),
        checkpoints: { get: (job, step) => c.checkpoint(job, step), keep: (job, step, bytes) => c.keepCheckpoint(job, step, bytes) },
      },
      {
        url: o.url, token: o.token, name: o.name, signal: stop.signal, throttle: () => share,
        log: (line) => tell({ message: line.replace(/^volunteer: /, '') }),
        onEvent: (e) => {
          if (e.type === 'joined') tell({ state: 'joining', peerId: e.peerId, message: `joined as ${e.peerId}; waiting for the next step boundary` });
          else if (e.type === 'state') tell({ step: e.step, message: `loaded the weights of step ${e.step} (${e.source})` });
          else if (e.type === 'step') tell({ state: 'training', step: e.step, ringSize: e.ringSize, loss: e.loss, imagesPerSec: e.images > 0 ? e.images / (e.computeMs / 1000) : null, message: `step ${e.step} done with ${e.ringSize} peer(s)` });
          else if (e.type === 'left') tell({ state: 'joining', message: `rejoining: ${e.reason}` });
        },
      },
    ).then(
      (exit) => tell(exit.reason === 'done' ? { state: 'done', message: `the job has finished (step ${exit.step ?? '-'}). Thank you!` } : { state: 'paused', message: 'paused: this device left the job; resume to rejoin' }, true),
      (e: unknown) => tell({ state: 'error', message: e instanceof Error ? e.message : String(e) }, true),
    ).finally(() => { running = null; });
    running = { stop, done };
  },

  async pause() {
    const r = running;
    if (!r) return;
    r.stop.abort();
    await r.done;
  },

  setThrottle(s: number) {
    share = Math.min(1, Math.max(0.05, s));
  },
};

expose(api);
