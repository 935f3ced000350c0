// `syncEvery "auto"` (the default of jobs that `npm start --host` opens beyond loopback): the
// coordinator picks H, the inner steps between synchronisations, from what the live ring costs.
//
// A committed step or round of H inner steps took wall time W, and its slowest member computed
// for C (its inner steps together). Per inner step the ring computes K = C / H; per
// synchronisation it pays S = W - C: the all-reduce not hidden behind backward, waiting for the
// slowest, and the coordinator's turn. At H the step costs H K + S for H steps' images, so the
// share of the time that is not computing is
//   share(H) = S / (H K + S)
// Sync (H = 1) is exact and, on a wired LAN, cheap: auto keeps it while share(1) < ROUNDS_FROM
// and goes back to it when share(1) falls below SYNC_BELOW (the gap between them keeps a ring
// near the line from flapping). Otherwise it takes the smallest H of AUTO_CHOICES whose share is
// at most TARGET_SHARE (the largest, AUTO_SYNC_MAX, when none is): rounds of 8 with the momentum
// carry ended above sync on Wi-Fi and home links (docs/sync-or-rounds.md), rounds of 32 five
// points below, so auto never goes past 8.
//
// K and S are medians over the last AUTO_WINDOW steps measured at the H in force, so one slow
// step (a collection, a checkpoint) does not move it. Not measured: a generation's first step
// (its links open), a step where a member reused work it computed earlier (a re-run), and a
// ring of one (nothing to synchronise). A new generation keeps H and measures again. A choice
// takes effect at the next round boundary (the next step begun); every member learns it from
// its assignment (a round lists its inner steps; a sync step has none). Pure: state in, state out.
import { AUTO_SYNC_MAX } from '../src/optim/outer.ts';
import { median } from '../src/stats.ts';
import type { SyncChoice } from '../src/protocol/messages.ts';

export const AUTO_CHOICES = [1, 2, 4, 8] as const;
export const AUTO_WINDOW = 3;
/** Sync gives way to rounds when the non-compute share of a sync step is at least this. */
export const ROUNDS_FROM = 0.3;
/** Rounds give way to sync when a sync step's share would be below this. */
export const SYNC_BELOW = 0.2;
/** The share rounds aim for: the smallest H that brings it this low. */
export const TARGET_SHARE = 0.1;

/** One measured step or round: its inner steps, wall time and its slowest member's compute time. */
export interface SyncSample { h: number; wallMs: number; computeMs: number }

export interface SyncAuto {
  /** H in force (1: exact sync steps). */
  h: number;
  /** The generation measured (-1: none yet); its first step is not counted. */
  generation: number;
  /** Steps measured at `h` in `generation` (at most AUTO_WINDOW, newest last). */
  samples: SyncSample[];
}

/** A change of H and why, for the job's log, its metrics and the dashboard. */
export type SyncDecision = SyncChoice;

export function newSyncAuto(h = 1): SyncAuto {
  return { h, generation: -1, samples: [] };
}

/** K and S of a window (medians of each sample's). */
export function syncCosts(samples: readonly SyncSample[]): { computeMs: number; syncMs: number } {
  return {
    computeMs: median(samples.map((s) => s.computeMs / s.h)),
    syncMs: median(samples.map((s) => Math.max(0, s.wallMs - s.computeMs))),
  };
}

/** The share of a step of H inner steps not spent computing, for per-step compute K and per-sync cost S. */
export function syncShare(computeMs: number, syncMs: number, h: number): number {
  const total = h * computeMs + syncMs;
  return total > 0 ? syncMs / total : 0;
}

/** The H auto wants for costs K and S when `current` is in force (the gap ROUNDS_FROM..SYNC_BELOW keeps the current mode). */
export function chooseH(computeMs: number, syncMs: number, current: number): number {
  const s1 = syncShare(computeMs, syncMs, 1);
  if (s1 < SYNC_BELOW || (current === 1 && s1 < ROUNDS_FROM)) return 1;
  for (const h of AUTO_CHOICES) if (h > 1 && syncShare(computeMs, syncMs, h) <= TARGET_SHARE) return h;
  return AUTO_SYNC_MAX;
}

const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;

/** Why H is `h`, in words (the dashboard and the log show it). */
export function syncReason(computeMs: number, syncMs: number, h: number): string {
  const s1 = syncShare(computeMs, syncMs, 1);
  const costs = `${syncMs.toFixed(0)} ms to synchronise against ${computeMs.toFixed(0)} ms of compute per step`;
  if (h === 1) return `the all-reduce and waiting are ${pct(s1)} of a sync step (${costs}): every step synchronised, exact`;
  const speedup = (computeMs + syncMs) / (computeMs + syncMs / h);
  return `the all-reduce and waiting are ${pct(s1)} of a sync step (${costs}): `
    + `rounds of ${h} bring it to ${pct(syncShare(computeMs, syncMs, h))}, ${speedup.toFixed(1)}x the images per second`;
}

/**
 * The state after a step of `generation` that ended at step `endStep` (from 1) committed with
 * `sample`; `decision` when H changed. `measured` false: the step says nothing of the ring's
 * costs (a re-run that reused work, a ring of one) and is not counted.
 */
export function syncRecord(
  a: SyncAuto, generation: number, endStep: number, sample: SyncSample, measured: boolean,
): { auto: SyncAuto; decision: SyncDecision | null } {
  if (generation !== a.generation) return { auto: { ...a, generation, samples: [] }, decision: null }; // its first step: links open
  if (!measured || sample.h !== a.h || !(sample.wallMs > 0)) return { auto: a, decision: null };
  const samples = [...a.samples, sample].slice(-AUTO_WINDOW);
  if (samples.length < AUTO_WINDOW) return { auto: { ...a, samples }, decision: null };
  const { computeMs, syncMs } = syncCosts(samples);
  const h = chooseH(computeMs, syncMs, a.h);
  if (h === a.h) return { auto: { ...a, samples }, decision: null };
  const decision: SyncDecision = {
    step: endStep, from: a.h, h, share: syncShare(computeMs, syncMs, 1), computeMs, syncMs,
    reason: syncReason(computeMs, syncMs, h),
  };
  return { auto: { h, generation, samples: [] }, decision };
}

/** The log line of a decision. */
export function decisionLine(d: SyncDecision): string {
  const to = d.h === 1 ? 'every step synchronised' : `rounds of ${d.h} local steps`;
  return `sync auto: after step ${d.step}, ${to} (was ${d.from === 1 ? 'every step' : `rounds of ${d.from}`}): ${d.reason}`;
}
