// Work stealing when it pays (a job's stealFraction "auto", the default): the coordinator tries
// both ways on the ring it has and keeps the faster. Stealing (tail-pool.ts) saves the time a step
// waits for its slowest member, and costs a micro-batch or more per member (on this machine's
// software WebGPU 15-29 ms each) and part of the all-reduce's overlap (only the final grant's
// backward hides it). Which wins depends on the ring's stragglers, its engines and its links,
// none of which the coordinator can know ahead, so it measures:
//   - on a ring that has run AUTO_SETTLE steps of one generation in its current way, a probe
//     runs the next 2 x AUTO_PROBE steps the two ways in turn, other-kept-kept-other (so that a
//     machine whose load drifts over the probe slows both ways alike);
//   - the median step wall time of the other way's steps against the kept way's: the other way
//     is kept if it is faster by more than AUTO_MARGIN;
//   - the next probe comes after `interval` more steps: AUTO_FIRST_INTERVAL after a switch,
//     doubled after each probe that lost, up to AUTO_MAX_INTERVAL (a ring where one way keeps
//     winning pays AUTO_PROBE / AUTO_MAX_INTERVAL = 1% of its steps for the other).
// A new generation (another ring) starts over: its first step (ring formation) is not counted, its
// way stays the last one chosen. Only fresh sync steps count (not a re-run after a loss, nor a
// round, which never steal). Pure: the state goes in and comes out.
import { median } from '../src/stats.ts';

export const AUTO_SETTLE = 20;
export const AUTO_PROBE = 8;
export const AUTO_MARGIN = 0.03;
export const AUTO_FIRST_INTERVAL = 50;
export const AUTO_MAX_INTERVAL = 800;

export interface StealTuner {
  /** The way kept: stealing on or off. */
  steals: boolean;
  /** The generation whose steps are counted (-1: none yet). */
  generation: number;
  /** Whether a probe runs (the two ways in turn). */
  probing: boolean;
  /** Wall times (ms) of the probe's steps run the other way, and run the kept way. */
  other: number[];
  kept: number[];
  /** Steps of this generation run the kept way since the last probe (or the generation's start). */
  steady: number;
  /** Steps run the kept way before the next probe (AUTO_SETTLE at first). */
  due: number;
  /** The wait after the next probe that loses (doubles each time). */
  interval: number;
}

/** What a tuner decided at the end of a probe, for the job's log. */
export interface TunerVerdict { steals: boolean; switched: boolean; probeMs: number; baseMs: number; nextAfter: number }

export function newTuner(steals = false): StealTuner {
  return { steals, generation: -1, probing: false, other: [], kept: [], steady: 0, due: AUTO_SETTLE, interval: AUTO_FIRST_INTERVAL };
}

/** Whether the next fresh sync step of `generation` steals: in a probe, the two ways in turn (other, kept, kept, other, ...). */
export function stealsNext(t: StealTuner, generation: number): boolean {
  const i = t.other.length + t.kept.length;
  const other = generation === t.generation && t.probing && (i % 4 === 0 || i % 4 === 3);
  return other ? !t.steals : t.steals;
}

/**
 * The tuner after a fresh sync step of `generation` committed in `wallMs`, run with stealing
 * `stole`; `verdict` when the step ended a probe.
 */
export function tunerRecord(t: StealTuner, generation: number, stole: boolean, wallMs: number): { tuner: StealTuner; verdict: TunerVerdict | null } {
  if (!(Number.isFinite(wallMs) && wallMs >= 0)) throw new RangeError(`tunerRecord: wallMs must be a finite time >= 0, got ${wallMs}`);
  // Another ring: its first step formed the ring and is not counted; the kept way stays.
  if (generation !== t.generation) {
    return { tuner: { ...newTuner(t.steals), generation, interval: t.interval, due: Math.max(AUTO_SETTLE, t.due - t.steady) }, verdict: null };
  }
  // A step not run the way the tuner asked (its plan was fixed before the last verdict): not counted.
  if (stole !== stealsNext(t, generation)) return { tuner: t, verdict: null };
  if (!t.probing) {
    const steady = t.steady + 1;
    return { tuner: { ...t, steady, probing: steady >= t.due }, verdict: null };
  }
  const other = stole !== t.steals ? [...t.other, wallMs] : t.other;
  const kept = stole === t.steals ? [...t.kept, wallMs] : t.kept;
  if (other.length < AUTO_PROBE || kept.length < AUTO_PROBE) return { tuner: { ...t, other, kept }, verdict: null };
  const probeMs = median(other), baseMs = median(kept);
  const switched = probeMs < baseMs * (1 - AUTO_MARGIN);
  const interval = switched ? AUTO_FIRST_INTERVAL : Math.min(AUTO_MAX_INTERVAL, t.interval * 2);
  const due = switched ? AUTO_FIRST_INTERVAL : t.interval;
  const tuner: StealTuner = { ...t, steals: switched ? !t.steals : t.steals, probing: false, other: [], kept: [], steady: 0, due, interval };
  return { tuner, verdict: { steals: tuner.steals, switched, probeMs, baseMs, nextAfter: due } };
}

/** The job log's line for a probe's verdict. */
export function verdictLine(v: TunerVerdict): string {
  const way = (s: boolean) => (s ? 'with work stealing' : 'without work stealing');
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  return v.switched
    ? `steps run ${way(v.steals)} from now: a median step of ${ms(v.probeMs)} against ${ms(v.baseMs)} ${way(!v.steals)}; tried again after ${v.nextAfter} steps`
    : `steps stay ${way(v.steals)}: ${ms(v.baseMs)} a step against ${ms(v.probeMs)} ${way(!v.steals)}; tried again after ${v.nextAfter} steps`;
}
