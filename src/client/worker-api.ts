// The typed boundary between the page (main thread) and the volunteer's Web Worker, used
// through comlink as `Remote<VolunteerWorkerApi>`. Status comes back through a proxied callback.
import type { CacheStats } from '../data/idb-cache.ts';

export interface DeviceReport {
  adapter: string;
  software: boolean;
  /** A quick 512^3 GEMM on this device. */
  gflops: number;
  kernel: string;
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
  /** Share of the device to use, in (0, 1]. */
  throttle: number;
}

export interface VolunteerWorkerApi {
  /** Acquires WebGPU and measures it; rejects with a message that says what to do when it is missing. */
  probe(): Promise<DeviceReport>;
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
