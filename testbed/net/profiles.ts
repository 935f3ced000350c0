// Link profiles of the test bed, and the numbers a bound needs. This kernel has no netem, so
// `wifi` and `home` run through a userspace switch (linkemu.py) that serializes every frame at
// the link rate and adds the one-way delay; `lan` is the kernel bridge with a 1 Gbit/s tbf
// (veth adds ~0.03 ms; the 0.2 ms is not emulated: on lan the 2 cores are the limit).
//
//   lan   1 Gbit/s each way per host, 0.2 ms (nominal)
//   wifi  ONE shared 100 Mbit/s medium: every frame of every station crosses it once; 3 ms one way
//   home  per host 10 Mbit/s up, 50 Mbit/s down; each access link adds 12.5 ms one way, so two
//         home hosts see 25 ms one way (50 ms round trip)
export type ProfileName = 'lan' | 'wifi' | 'home';

export interface SwitchConfig {
  /** Rates in bits/s; 0: unlimited. */
  upBps: number;
  downBps: number;
  /** One shared medium for every frame instead of per-port uplinks (Wi-Fi). */
  sharedBps: number;
  upDelayMs: number;
  downDelayMs: number;
  /** A queue longer than this (ms of serialization) drops the frame (a router's buffer). */
  queueMs: number;
}

export interface Profile {
  name: ProfileName;
  /** Through linkemu.py (true) or the kernel bridge (false). */
  emulated: boolean;
  switch: SwitchConfig;
  /** For bounds: bytes/s a host can send and receive, the shared medium's (0: none), one-way host-to-host latency. */
  bound: { upBytesPerS: number; downBytesPerS: number; sharedBytesPerS: number; oneWayMs: number };
}

const M = 1e6;
export const PROFILES: Record<ProfileName, Profile> = {
  lan: {
    name: 'lan', emulated: false,
    switch: { upBps: 1000 * M, downBps: 1000 * M, sharedBps: 0, upDelayMs: 0.1, downDelayMs: 0.1, queueMs: 10 },
    bound: { upBytesPerS: 125 * M, downBytesPerS: 125 * M, sharedBytesPerS: 0, oneWayMs: 0.2 },
  },
  wifi: {
    name: 'wifi', emulated: true,
    switch: { upBps: 0, downBps: 0, sharedBps: 100 * M, upDelayMs: 3, downDelayMs: 0, queueMs: 100 },
    bound: { upBytesPerS: 12.5 * M, downBytesPerS: 12.5 * M, sharedBytesPerS: 12.5 * M, oneWayMs: 3 },
  },
  home: {
    name: 'home', emulated: true,
    switch: { upBps: 10 * M, downBps: 50 * M, sharedBps: 0, upDelayMs: 12.5, downDelayMs: 12.5, queueMs: 200 },
    bound: { upBytesPerS: 1.25 * M, downBytesPerS: 6.25 * M, sharedBytesPerS: 0, oneWayMs: 25 },
  },
};

/**
 * The ring all-reduce bound: 2(N-1) steps, each sending bytes/N per peer. Per-host links: the
 * slowest of up and down limits each step; a shared medium carries all N peers' chunks of a step
 * one after another. Plus one one-way latency per step.
 */
export function allReduceBoundMs(p: Profile, n: number, bytes: number): number {
  if (n < 2) return 0;
  const steps = 2 * (n - 1);
  const chunk = bytes / n;
  const perStep = p.bound.sharedBytesPerS > 0 ? (n * chunk) / p.bound.sharedBytesPerS : chunk / Math.min(p.bound.upBytesPerS, p.bound.downBytesPerS);
  return steps * (perStep * 1000 + p.bound.oneWayMs);
}
