// The typed boundary between the page (main thread) and the volunteer's Web Worker, used
// through comlink as `Remote<VolunteerWorkerApi>`. Status comes back through a proxied callback.
import type { BackendKind } from '../backend/engine.ts';
import type { CacheStats } from '../data/idb-cache.ts';
import type { BackendMeasure, BackendPreference } from './backend-choice.ts';

export interface DeviceReport {
  /** The backend this device trains on, and why (src/client/backend-choice.ts). */
  backend: BackendKind;
  reason: string;
  /** The chosen engine's device (adapter name, or the wasm configuration). */
  device: string;
  /** True where the chosen path runs on the CPU (wasm, or software WebGPU). */
  cpu: boolean;
  /** Each path's probe (training images/s, or why it is not available). */
  measures: BackendMeasure[];
  preference: BackendPreference;
}

export type VolunteerState = 'idle' | 'joining' | 'training' | 'paused' | 'done' | 'error';

export interface VolunteerStatus {
  state: VolunteerState;
  message: string;
  peerId: string | null;
  /** Steps done by the job as this peer last saw it. */
  step: number | null;
  ringSize: number;
  loss: number | null;
  /** This peer's images/s of compute (its slice / compute time). */
  imagesPerSec: number | null;
  cache: CacheStats | null;
}

export interface StartOptions {
  /** The coordinator's origin, e.g. location.origin. */
  url: string;
  token?: string;
  name?: string;
  /** The donor's lasting id (src/ui/donor.ts). */
  donor?: string;
  /** Share of the device to use, in (0, 1]. */
  throttle: number;
  /** Which compute path to train on ('auto': the faster one measured here). */
  backend: BackendPreference;
}

export interface VolunteerWorkerApi {
  /**
   * Measures the compute paths this browser has (WebGPU, wasm) and picks one by `preference`;
   * rejects with a message that says what to do when none works. Probing again with another
   * preference switches the engine (not while training). `pageHasWebGpu`: whether the page
   * sees navigator.gpu (a browser without it on the page has none in workers either).
   */
  probe(preference: BackendPreference, pageHasWebGpu: boolean): Promise<DeviceReport>;
  /**
   * Joins and trains until paused or the job ends; progress goes to `onStatus`. `rtc` is the
   * worker's end of a channel whose other end the page serves with serveRtcRelay (browsers have
   * no WebRTC in workers). Transfer it.
   */
  start(o: StartOptions, rtc: MessagePort, onStatus: (s: VolunteerStatus) => void): Promise<void>;
  /** Leaves the job (the ring heals without this peer); start() again to resume. */
  pause(): Promise<void>;
  setThrottle(share: number): void;
}
