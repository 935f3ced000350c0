// The volunteer's Web Worker: the compute engine (WebGPU or wasm), the session socket and
// IndexedDB all live here (WebRTC is relayed from the page), so the page never freezes. The page talks to it through comlink (worker-api.ts).
import { expose } from 'comlink';
import { relayPeerClass } from '../comm/relay.ts';
import { browserDecoder } from '../data/decode-browser.ts';
import { VolunteerCache } from '../data/idb-cache.ts';
import type { AnyEngine } from '../backend/engine.ts';
import { WebGpuEngine } from '../backend/webgpu.ts';
import { getDevice, WEBGPU_HELP } from '../gpu/device.ts';
import { autotuneGemm } from '../ops/gemm-tune.ts';
import { WasmEngine } from '../wasm/engine.ts';
import { chooseEngine, type BackendPreference } from './backend-choice.ts';
import { runVolunteer, type SocketCtor } from './volunteer.ts';
import type { DeviceReport, StartOptions, VolunteerStatus, VolunteerWorkerApi } from './worker-api.ts';

let engine: AnyEngine | null = null;
let report: DeviceReport | null = null;
let cache: VolunteerCache | null = null;
let running: { stop: AbortController; done: Promise<void> } | null = null;
let share = 1;

let pageHasWebGpu = true;

const factories = {
  webgpu: async (): Promise<AnyEngine> => {
    if (!pageHasWebGpu) throw new Error(WEBGPU_HELP);
    const gpu = await getDevice();
    await autotuneGemm(gpu);
    return new WebGpuEngine(gpu);
  },
  wasm: (): Promise<AnyEngine> => WasmEngine.create(),
};

async function device(preference: BackendPreference): Promise<{ engine: AnyEngine; report: DeviceReport }> {
  if (engine && report?.preference === preference) return { engine, report };
  if (running) throw new Error('pause before changing the compute path');
  engine?.destroy();
  engine = null;
  const chosen = await chooseEngine(preference, factories);
  engine = chosen.engine;
  report = {
    backend: chosen.choice.chosen, reason: chosen.choice.reason, device: engine.info.description, cpu: engine.info.cpu,
    measures: chosen.choice.measures, preference,
  };
  return { engine, report };
}

const api: VolunteerWorkerApi = {
  async probe(preference, hasWebGpu) {
    if (hasWebGpu !== pageHasWebGpu && !running) {
      pageHasWebGpu = hasWebGpu;
      report = null; // measure again with what the page says
    }
    return (await device(preference)).report;
  },

  async start(o: StartOptions, rtc: MessagePort, onStatus: (s: VolunteerStatus) => void) {
    if (running) return;
    share = o.throttle;
    const { engine: e } = await device(o.backend);
    cache ??= await VolunteerCache.open();
    const c = cache;
    const status: VolunteerStatus = {
      state: 'joining', message: 'joining the job…', peerId: null, step: null, ringSize: 0, loss: null, imagesPerSec: null, cache: c.stats,
    };
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
        engine: e, Peer, rtcConfig: { iceServers: [] }, iceCheck: (config) => Peer.iceCheck(config), WebSocket: WebSocket as unknown as SocketCtor,
        decoder: browserDecoder,
        cacheShards: (s) => c.shards(s),
        checkpoints: { get: (job, step) => c.checkpoint(job, step), keep: (job, step, bytes) => c.keepCheckpoint(job, step, bytes) },
      },
      {
        url: o.url, token: o.token, name: o.name, ...(o.donor ? { donor: o.donor } : {}), signal: stop.signal, throttle: () => share,
        log: (line) => tell({ message: line.replace(/^volunteer: /, '') }),
        onEvent: (e) => {
          if (e.type === 'joined') tell({ state: 'joining', peerId: e.peerId, message: `joined as ${e.peerId}; waiting for the next step boundary` });
          else if (e.type === 'state') tell({ step: e.step, message: `loaded the weights of step ${e.step} (${e.source})` });
          else if (e.type === 'step') tell({
            state: 'training', step: e.step, ringSize: e.ringSize, loss: e.loss, imagesPerSec: e.images > 0 ? e.images / (e.computeMs / 1000) : null,
            message: e.innerSteps > 1
              ? `round of ${e.innerSteps} local steps done (to step ${e.step}) with ${e.ringSize} peer(s); `
                + `sent ${(e.sentBytes / 1e6).toFixed(1)} MB for ${e.images} images`
              : `step ${e.step} done with ${e.ringSize} peer(s)`,
          });
          else if (e.type === 'left') tell({ state: 'joining', message: `rejoining: ${e.reason}` });
        },
      },
    ).then(
      (exit) => tell(exit.reason === 'done'
        ? { state: 'done', message: `the job has finished (step ${exit.step ?? '-'}). Thank you!` }
        : { state: 'paused', message: 'paused: this device left the job; resume to rejoin' }, true),
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
