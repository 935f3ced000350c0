// Where a committed step's time went on the ring's critical path, from the per-peer timings of
// its record (PeerStepTiming, filled by commitRecords in coordinator/driver-steps.ts at the step's commit), and the
// dashboard's chart of it: one stacked bar per step, compute / all-reduce not hidden / overhead,
// with the part of the all-reduce that ran during backward (hidden by the overlap) drawn over
// the top of compute, where it happened.
//
// Why these three figures: a sync step ends when the slowest member's backward is done and the
// all-reduce has finished after it. The other members wait for that member (their waitMs is its
// compute seen from elsewhere, so wait is not counted again): compute is the slowest member's.
// The exposed all-reduce and the overhead are each member's own and differ little along a ring;
// their median is a typical member's, not one outlier's.
//
// Older volunteers, and rounds, report no split (no exposedCommMs / overheadMs): their whole
// all-reduce (commMs) stands in for the exposed part, drawn pale, and no overhead is drawn.
import type { PeerStepTiming } from '../protocol/messages.ts';
import { median } from '../stats.ts';
import { axesSvg, axisOver, chartHead, esc, leftMargin, niceTicks, placeholderSvg, scaleOf, tickLabels, type Frame } from './charts.ts';

export type StepBound = 'compute' | 'communication' | 'overhead';

/** One step's time on the critical path (ms). */
export interface StepSplit {
  /** The slowest member's compute: the ring cannot finish before it. */
  computeMs: number;
  /** Median over the members of the all-reduce after their backward (commMs for a member that did not report it). */
  exposedCommMs: number;
  /** Median of the all-reduce that ran during backward (commMs - exposedCommMs), over the members that reported the split; null: none did. */
  hiddenCommMs: number | null;
  /** Median overhead (host work between backward stages, yields) of the members that reported it; null: none did. */
  overheadMs: number | null;
  /** Every member reported exposedCommMs (false: commMs stood in for some or all of them). */
  measured: boolean;
  peers: number;
  /** Images that came from gradient sums kept from an aborted attempt (a re-run computes less). */
  reusedImages: number;
  /** The largest of the three parts. */
  bound: StepBound;
}

/** A reported time, or undefined when absent or not a time (a metrics file is read as found). */
const reported = (v: number | undefined): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? Math.max(0, v) : undefined);
const ms = (v: number) => reported(v) ?? 0;

/** The split of one step from its members' timings; null for a record without any. */
export function stepSplit(timings: readonly PeerStepTiming[]): StepSplit | null {
  if (timings.length === 0) return null;
  const split = timings.filter((t) => reported(t.exposedCommMs) !== undefined);
  const overheads = timings.map((t) => reported(t.overheadMs)).filter((v): v is number => v !== undefined);
  const computeMs = Math.max(...timings.map((t) => ms(t.computeMs)));
  const exposedCommMs = median(timings.map((t) => reported(t.exposedCommMs) ?? ms(t.commMs)));
  // exposedCommMs also counts waiting for a slower neighbour after backward, so it can exceed commMs.
  const hiddenCommMs = split.length ? median(split.map((t) => Math.max(0, ms(t.commMs) - ms(t.exposedCommMs!)))) : null;
  const overheadMs = overheads.length ? median(overheads) : null;
  const parts: [StepBound, number][] = [['compute', computeMs], ['communication', exposedCommMs], ['overhead', overheadMs ?? 0]];
  const bound = parts.reduce((a, p) => (p[1] > a[1] ? p : a))[0];
  const reusedImages = timings.reduce((a, t) => a + (Number.isInteger(t.reused) && t.reused! > 0 ? t.reused! : 0), 0);
  return { computeMs, exposedCommMs, hiddenCommMs, overheadMs, measured: split.length === timings.length, peers: timings.length, reusedImages, bound };
}

const BOUND_WORDS: Record<StepBound, string> = { compute: 'compute-bound', communication: 'communication-bound', overhead: 'overhead-bound' };

/** One line on a step's split: what bounds it and how much of its all-reduce the overlap hid. */
export function splitSummary(step: number, s: StepSplit, round = false): string {
  const head = `${round ? 'round to step' : 'step'} ${step}: ${BOUND_WORDS[s.bound]}`;
  if (s.peers === 1) return `${head} (a ring of one: nothing to all-reduce)`;
  if (s.hiddenCommMs === null) return `${head} (all-reduce ${s.exposedCommMs.toFixed(0)} ms; no overlap split reported)`;
  const total = s.hiddenCommMs + s.exposedCommMs;
  const pct = total > 0 ? ` (${((100 * s.hiddenCommMs) / total).toFixed(0)}%)` : '';
  return `${head}; backward hid ${s.hiddenCommMs.toFixed(0)} of ${total.toFixed(0)} ms of all-reduce${pct}`;
}

export interface SplitBar { step: number; split: StepSplit }

const PART = { compute: '#1f77b4', comm: '#ff7f0e', overhead: '#999999' } as const;
// The hidden all-reduce: orange stripes over compute's blue (a blend of the two would read as a
// fourth colour). Every copy of this chart on a page defines the same pattern under the same id.
const HIDDEN = 'url(#step-split-hidden)';
const HIDDEN_DEF = '<defs><pattern id="step-split-hidden" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
  + `<rect width="3" height="6" fill="${PART.comm}"/></pattern></defs>`;
const LEGEND: [string, string][] = [
  ['compute (slowest)', `<rect width="12" height="12" fill="${PART.compute}"/>`],
  ['all-reduce not hidden', `<rect width="12" height="12" fill="${PART.comm}"/>`],
  ['overhead', `<rect width="12" height="12" fill="${PART.overhead}"/>`],
  ['hidden by backward', `<rect width="12" height="12" fill="${PART.compute}"/><rect width="12" height="12" fill="${HIDDEN}"/>`],
];

/**
 * The split of each step as a stacked bar over its step number (for rounds, the round's last
 * step), with notes under the plot for what the bars cannot say on their own.
 */
export function stepSplitSvg(bars: readonly SplitBar[], o: { width?: number; height?: number; rounds?: boolean } = {}): string {
  const W = o.width ?? 720, title = `where the time of each ${o.rounds ? 'round' : 'step'} went`;
  const last = bars[bars.length - 1];
  if (!last) return placeholderSvg(title, 'no step committed yet', W, o.height ?? 440);
  const notes = [
    bars.some((b) => !b.split.measured) ? 'pale: no overlap split (older volunteer, or a round): whole all-reduce shown' : '',
    bars.some((b) => b.split.peers === 1) ? 'a step of a ring of one has no all-reduce to show' : '',
    bars.some((b) => b.split.reusedImages > 0) ? '* re-run after a lost member: some images reused from kept sums (less compute)' : '',
  ].filter(Boolean);
  const below = 16 * notes.length, T = 74, B = 60 + below, H = (o.height ?? 440) + below;
  const total = (s: StepSplit) => s.computeMs + s.exposedCommMs + (s.overheadMs ?? 0);
  const ya = axisOver(bars.map((b) => total(b.split)));
  const L = leftMargin(tickLabels(ya)), R = 20;
  const f: Frame = { W, H, L, R, T, B };
  // Bars sit at their step numbers (rounds are H steps apart): half the closest spacing either side.
  const steps = bars.map((b) => b.step);
  const gap = steps.slice(1).reduce((g, s, i) => Math.min(g, s - steps[i]!), Infinity);
  const spacing = Number.isFinite(gap) && gap > 0 ? gap : 1;
  const X = scaleOf({ lo: steps[0]! - spacing / 2, hi: last.step + spacing / 2 }, L, W - R);
  const xt = niceTicks(steps[0]!, last.step, 6, true);
  const xa = { ...xt, ticks: xt.ticks.filter((v) => v >= steps[0]! && v <= last.step) };
  const Y = scaleOf(ya, H - B, T);
  const bw = Math.min(40, Math.max(1, 0.8 * (X(spacing) - X(0))));
  const out = [...chartHead(f, title, o.rounds ? 'step (at the end of each round)' : 'step', 'ms', below), HIDDEN_DEF, ...axesSvg(f, xa, X, ya, Y)];
  out.push(`<text class="summary" x="${W / 2}" y="40" text-anchor="middle" fill="#444">${esc(splitSummary(last.step, last.split, o.rounds))}</text>`);
  let lx = 12;
  for (const [name, swatch] of LEGEND) {
    out.push(`<g transform="translate(${lx} 50)">${swatch}</g><text class="legend" x="${lx + 16}" y="60">${esc(name)}</text>`);
    lx += 16 + 6.5 * name.length + 12;
  }
  const rect = (cls: string, x: number, from: number, ms: number, fill: string, extra = '') =>
    `<rect class="${cls}" x="${x.toFixed(1)}" y="${Y(from + ms).toFixed(1)}" width="${bw.toFixed(1)}" `
      + `height="${Math.max(0, Y(from) - Y(from + ms)).toFixed(1)}" fill="${fill}"${extra}/>`;
  for (const { step, split: s } of bars) {
    const x = X(step) - bw / 2;
    out.push(rect('compute', x, 0, s.computeMs, PART.compute));
    // What the overlap hid ran during backward: drawn over compute's top (never past its bottom).
    if (s.hiddenCommMs) {
      const h = Math.min(s.hiddenCommMs, s.computeMs);
      out.push(rect('hidden', x, s.computeMs - h, h, HIDDEN));
    }
    out.push(rect(s.measured ? 'comm' : 'comm comm-fallback', x, s.computeMs, s.exposedCommMs, PART.comm, s.measured ? '' : ' fill-opacity="0.45"'));
    if (s.overheadMs !== null) out.push(rect('overhead', x, s.computeMs + s.exposedCommMs, s.overheadMs, PART.overhead));
    if (s.reusedImages > 0) out.push(`<text class="reused" x="${(x + bw / 2).toFixed(1)}" y="${(Y(total(s)) - 3).toFixed(1)}" text-anchor="middle">*</text>`);
  }
  notes.forEach((n, i) => out.push(`<text class="note" x="12" y="${H - below + 4 + 16 * i}" fill="#666">${esc(n)}</text>`));
  out.push('</svg>');
  return out.join('\n');
}
