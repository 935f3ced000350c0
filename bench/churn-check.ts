// What the churn benchmark checks after a run: the job's history (metrics.jsonl) accounts for
// every step exactly once, and every checkpoint left in the job folder is readable and holds
// the weights the ring committed for its step.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { MetricRecord } from '../coordinator/metrics.ts';
import { CheckpointError, decodeCheckpoint } from '../src/checkpoint/format.ts';
import { weightChecksum } from '../src/client/checksum.ts';
import { median } from './timing.ts';

export interface HistoryCheck {
  /** The highest committed step. */
  finalStep: number;
  /** Committed step records (all of them, re-runs included). */
  stepRecords: number;
  /** Step numbers in 1..finalStep without a committed record. */
  lostSteps: number[];
  /** Step numbers with more than one committed record. */
  doubledSteps: number[];
  /** Steps whose peers reported different checksums in the committed record (the driver should never commit these). */
  splitChecksums: number[];
  aborts: number;
  /** Of the aborts, those that formed the same ring again (a link lost as it formed; nobody left). */
  formedAgain: number;
  generations: number;
  maxRing: number;
  checkpointsRecorded: number;
  done: boolean;
}

export function checkHistory(records: readonly MetricRecord[]): HistoryCheck {
  const count = new Map<number, number>();
  const splitChecksums: number[] = [];
  let aborts = 0;
  let formedAgain = 0;
  let generations = 0;
  let maxRing = 0;
  let checkpointsRecorded = 0;
  let done = false;
  let stepRecords = 0;
  for (const r of records) {
    if (r.type === 'step') {
      stepRecords++;
      count.set(r.step, (count.get(r.step) ?? 0) + 1);
      if (new Set(r.peers.map((p) => p.checksum)).size > 1) splitChecksums.push(r.step);
      maxRing = Math.max(maxRing, r.ring);
    } else if (r.type === 'abort') {
      aborts++;
      if (r.formedAgain) formedAgain++;
    }
    else if (r.type === 'generation') {
      generations++;
      maxRing = Math.max(maxRing, r.ring.length);
    } else if (r.type === 'checkpoint') checkpointsRecorded++;
    else if (r.type === 'done') done = true;
  }
  const finalStep = Math.max(0, ...count.keys());
  const lostSteps: number[] = [];
  for (let s = 1; s <= finalStep; s++) if (!count.has(s)) lostSteps.push(s);
  const doubledSteps = [...count].filter(([, n]) => n > 1).map(([s]) => s).sort((a, b) => a - b);
  return { finalStep, stepRecords, lostSteps, doubledSteps, splitChecksums, aborts, formedAgain, generations, maxRing, checkpointsRecorded, done };
}

/** The committed weight checksum of each step (its last record, as latestPerStep counts). */
export function committedChecksums(records: readonly MetricRecord[]): Map<number, string> {
  const by = new Map<number, string>();
  for (const r of records) if (r.type === 'step' && r.peers.length) by.set(r.step, r.peers[0]!.checksum);
  return by;
}

export interface CheckpointCheck {
  files: number;
  steps: number[];
  /** Files that do not decode (length, sha256, header). */
  unreadable: { file: string; why: string }[];
  /** Files whose fingerprint is not the job's model. */
  wrongModel: string[];
  /** Files whose weights' checksum differs from the committed checksum of their step. */
  mismatches: { step: number; file: string; checkpoint: string; committed: string }[];
  /** Files of a step that has no committed record (only step 0 may, when it is the seed). */
  unmatched: number[];
}

const NAME = /^step-(\d{10})\.vtck$/;

/** Decodes and hash-verifies every checkpoint file of a job folder and matches it to the history. */
export async function checkCheckpoints(jobDir: string, fingerprint: string, committed: ReadonlyMap<number, string>): Promise<CheckpointCheck> {
  const dir = join(jobDir, 'checkpoints');
  const names = (await readdir(dir)).filter((n) => NAME.test(n)).sort();
  const out: CheckpointCheck = { files: names.length, steps: [], unreadable: [], wrongModel: [], mismatches: [], unmatched: [] };
  for (const name of names) {
    const path = join(dir, name);
    let c;
    try {
      c = decodeCheckpoint(new Uint8Array(await readFile(path)), path);
    } catch (e) {
      if (!(e instanceof CheckpointError)) throw e;
      out.unreadable.push({ file: name, why: e.message });
      continue;
    }
    out.steps.push(c.step);
    if (c.fingerprint !== fingerprint) out.wrongModel.push(name);
    const want = committed.get(c.step);
    const got = weightChecksum(c.weights);
    if (want === undefined) out.unmatched.push(c.step);
    else if (want !== got) out.mismatches.push({ step: c.step, file: name, checkpoint: got, committed: want });
  }
  return out;
}

/** Least-squares slope of y over x (null with fewer than 2 distinct x). */
export function slope(points: readonly (readonly [number, number])[]): number | null {
  const n = points.length;
  if (n < 2) return null;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  let sxx = 0;
  let sxy = 0;
  for (const [x, y] of points) {
    sxx += (x - mx) ** 2;
    sxy += (x - mx) * (y - my);
  }
  return sxx > 0 ? sxy / sxx : null;
}

export interface Throughput {
  /** The window, in ms since the epoch: (from, to]. */
  fromMs: number;
  toMs: number;
  /** Images of the steps committed in the window (every peer's slice, reused or computed). */
  images: number;
  imagesPerSec: number;
  /** Of `images`, those a survivor reused from the sum it kept when a step lost a member. */
  reusedImages: number;
  steps: number;
}

/** Committed images per second over (fromMs, toMs]: the goodput's numerator and denominator. */
export function committedThroughput(records: readonly MetricRecord[], fromMs: number, toMs: number): Throughput {
  let images = 0;
  let reusedImages = 0;
  let steps = 0;
  for (const r of records) {
    if (r.type !== 'step' || r.time <= fromMs || r.time > toMs) continue;
    steps++;
    for (const p of r.peers) {
      images += p.images;
      reusedImages += p.reused ?? 0;
    }
  }
  const seconds = (toMs - fromMs) / 1000;
  return { fromMs, toMs, images, imagesPerSec: seconds > 0 ? images / seconds : 0, reusedImages, steps };
}

/** Committed steps' wall times, split by whether the step was its generation's first. */
export interface StepSplit {
  /** The first committed step of each generation: its ring formed (new links dialed) during it. */
  first: { steps: number; medianMs: number; totalMs: number };
  /** Every other committed step (links of the generation already open). */
  rest: { steps: number; medianMs: number; totalMs: number };
}

/**
 * Where committed steps in (fromMs, toMs] spent their time: the first step of each generation
 * (which waits for its ring to form) against the rest. Under churn the first kind carries the
 * cost of every membership change that a steady ring does not pay.
 */
export function stepSplit(records: readonly MetricRecord[], fromMs: number, toMs: number): StepSplit {
  const first: number[] = [];
  const rest: number[] = [];
  let generation: number | null = null;
  for (const r of records) {
    if (r.type !== 'step') continue;
    const isFirst = r.generation !== generation;
    generation = r.generation;
    if (r.time <= fromMs || r.time > toMs) continue;
    (isFirst ? first : rest).push(r.wallMs);
  }
  const summary = (xs: number[]) => ({ steps: xs.length, medianMs: xs.length ? median(xs) : 0, totalMs: xs.reduce((a, x) => a + x, 0) });
  return { first: summary(first), rest: summary(rest) };
}

/** What a churn run lost against its baseline, in two parts whose product is the goodput (lossSplit). */
export interface LossSplit {
  /**
   * The churn run's committed steps timed at its own ordinary pace (mean of the steps that were
   * not their generation's first), over its window: below 1 by what membership changes cost
   * (first steps of generations, admissions, aborted attempts, decisions) and by what every run
   * pays between its steps (calmShare).
   */
  membershipGoodput: number;
  /**
   * The baseline's ordinary pace over the churn run's (mean ordinary step, baseline / churn):
   * below 1 when ordinary steps ran slower under churn (on one machine: the CPU that joiners'
   * start-up, leavers' exits and replacement host processes take from everyone's steps).
   */
  ordinaryPace: number;
  /**
   * The same measure as membershipGoodput taken on the baseline (its committed steps at its own
   * ordinary pace over its window; null without the baseline's window). Below 1 without any
   * churn: a step's wall time does not hold the coordinator's turn between two steps (results
   * in, commit, next assignment: about 1 ms here), nor the baseline's one first step.
   */
  calmShare: number | null;
  /**
   * membershipGoodput / calmShare: what membership changes cost beyond what every run pays
   * (null without calmShare). With ordinaryPace it makes the goodput in steps per second
   * exactly: membershipVsCalm x ordinaryPace = (churn steps / window) / (calm steps / window).
   */
  membershipVsCalm: number | null;
}

/**
 * Splits goodput (committed steps per second with churn over without, at the same batch) into
 * membershipVsCalm x ordinaryPace, with membershipGoodput and calmShare the two shares whose
 * ratio membershipVsCalm is. Null when either run has no ordinary step or the churn run an empty
 * window; calmShare and membershipVsCalm null when the baseline's window is not given or empty.
 */
export function lossSplit(churn: { split: StepSplit; windowMs: number }, calm: { split: StepSplit; windowMs?: number }): LossSplit | null {
  const pace = (s: StepSplit) => (s.rest.steps > 0 ? s.rest.totalMs / s.rest.steps : null);
  const own = pace(churn.split);
  const base = pace(calm.split);
  if (own === null || base === null || churn.windowMs <= 0) return null;
  const steps = (s: StepSplit) => s.first.steps + s.rest.steps;
  const membershipGoodput = (steps(churn.split) * own) / churn.windowMs;
  const calmShare = calm.windowMs !== undefined && calm.windowMs > 0 ? (steps(calm.split) * base) / calm.windowMs : null;
  return {
    membershipGoodput,
    ordinaryPace: base / own,
    calmShare,
    membershipVsCalm: calmShare !== null && calmShare > 0 ? membershipGoodput / calmShare : null,
  };
}

/**
 * CPU seconds from /proc/<pid>/stat text: the process's own user + system time and that of its
 * children it has reaped (fields 14-17, in clock ticks of 1/`hz` s). The comm field (2) may hold
 * spaces and parentheses: fields are counted after its last ')'. Null when the text is not a stat line.
 */
export function cpuSecondsOfStat(stat: string, hz = 100): { own: number; children: number } | null {
  const close = stat.lastIndexOf(')');
  if (close < 0) return null;
  // After ')': field 3 (state) is the first; utime is field 14, so index 11 here.
  const f = stat.slice(close + 1).trim().split(/\s+/);
  const [ut, st, cut, cst] = [11, 12, 13, 14].map((i) => Number(f[i]));
  if (![ut, st, cut, cst].every((x) => Number.isInteger(x) && x! >= 0)) return null;
  return { own: (ut! + st!) / hz, children: (cut! + cst!) / hz };
}

/** What a churn run's CPU says (both runs measured whole, this process and its reaped host processes). */
export interface CpuSplit {
  /** CPU ms per committed step with churn, and without. */
  msPerStep: number;
  baselineMsPerStep: number;
  /**
   * (CPU with churn - its steps at the baseline's CPU per step) / the volunteers started beyond the baseline's: what each join and its
   * leave cost the machine.
   */
  extraSecondsPerStart: number | null;
}

export function cpuSplit(churn: { cpuS: number; steps: number; started: number }, calm: { cpuS: number; steps: number; started: number }): CpuSplit | null {
  if (churn.steps <= 0 || calm.steps <= 0) return null;
  const base = calm.cpuS / calm.steps;
  const extraStarts = churn.started - calm.started;
  return {
    msPerStep: (1000 * churn.cpuS) / churn.steps,
    baselineMsPerStep: 1000 * base,
    extraSecondsPerStart: extraStarts > 0 ? (churn.cpuS - churn.steps * base) / extraStarts : null,
  };
}

/** A baseline measured twice, before and after the churn run, as one (bracketCalm). */
export interface BracketedCalm {
  /** Committed images/s: the mean of the two runs'. */
  imagesPerSec: number;
  /** Both runs' committed steps together (counts and totals summed; medians: the mean of the two). */
  split: StepSplit;
  /** Both runs' windows together (ms; absent when either run's is not given). */
  windowMs?: number;
  /** The run after over the run before, minus 1: how far the two calm runs differed (the ring's own spread, or the machine's drift). */
  drift: number;
}

/**
 * Two baselines around a churn run as one. The same calm ring of 50 runs 6-29% faster or slower
 * from one run to the next here (its own spread: the machine's speed stayed steady by
 * bench/speed-probe.ts); a baseline measured only after the churn run puts all of one run's
 * spread into goodput, one on each side halves its weight and cancels a steady drift.
 */
export function bracketCalm(
  before: { imagesPerSec: number; split: StepSplit; windowMs?: number }, after: { imagesPerSec: number; split: StepSplit; windowMs?: number },
): BracketedCalm {
  const part = (a: StepSplit['rest'], b: StepSplit['rest']) => ({
    steps: a.steps + b.steps, medianMs: (a.medianMs + b.medianMs) / 2, totalMs: a.totalMs + b.totalMs,
  });
  return {
    imagesPerSec: (before.imagesPerSec + after.imagesPerSec) / 2,
    split: { first: part(before.split.first, after.split.first), rest: part(before.split.rest, after.split.rest) },
    ...(before.windowMs !== undefined && after.windowMs !== undefined ? { windowMs: before.windowMs + after.windowMs } : {}),
    drift: before.imagesPerSec > 0 ? after.imagesPerSec / before.imagesPerSec - 1 : 0,
  };
}
