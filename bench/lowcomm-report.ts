// The figures of `npm run bench -- lowcomm` from its runs (bench/lowcomm.ts trains them; `--from
// FILE` recomputes them from a results file without training again): per profile the time each
// mode needs to reach the target, the speedups, the top-1 gap and the bytes per image; writes
// bench/results/lowcomm.json and lowcomm.svg and returns the summary (the bench's last line).
//
// Two targets. The headline's (the issue's): sync's final top-1 minus 2 points; a mode that
// never reaches it has no time and a speedup of 0. And "the same top-1": the highest top-1 that
// both sync and the best H reach (an evaluation at or above it in both curves), so the speedup
// there says what rounds buy on the wire even when they end below sync's target.
import type { ProfileName } from '../testbed/net/profiles.ts';
import { measuredRate, projectedSeconds, projectedTimeToTarget, warmupOf, type StepRate } from './lowcomm-project.ts';
import { timeToTarget, type RunResult } from './lowcomm-run.ts';
import { lineChartSvg } from './plot-lines.ts';
import { writeFileEnsuringDir } from './plot.ts';

export interface LowcommSettings {
  steps: number; batch: number; optimizer: 'sgd' | 'lars'; wire: string; lr: number; warmupSteps: number;
  outerLr: number; outerMomentum: number;
  /** The rounds' momentum carry (job momentumCarry); absent: each peer keeps its own inner momentum. */
  carry?: number;
  syncWarmup: number; evalEvery: number; evalSamples: number; finalEvalSamples: number;
  timeSteps: number; full: boolean; profiles: ProfileName[]; hs: number[]; peers: number; model: string; dataset: string;
}

/**
 * What the bench measured: accuracy runs keyed `${profile}/${H}` (lan only unless --full), timing
 * runs likewise; with --auto, a whole run with syncEvery "auto" per profile (keyed by profile).
 */
export interface LowcommRuns {
  settings: LowcommSettings;
  accuracy: Record<string, RunResult>;
  timing: Record<string, RunResult>;
  auto?: Record<string, RunResult>;
}

/** A mode's name in logs and the JSON's rates: 'sync' or 'H = 8'. */
export const modeLabel = (h: number | 'auto'): string => (h === 1 ? 'sync' : h === 'auto' ? 'auto' : `H = ${h}`);
const label = modeLabel;
const final = (r: RunResult | undefined) => r?.evals[r.evals.length - 1]?.top1 ?? null;
const best = (r: RunResult) => Math.max(...r.evals.map((e) => e.top1));
const r3 = (x: number | null) => (x === null ? null : +x.toFixed(3));

export function report(runs: LowcommRuns, outDir = 'bench/results'): Record<string, unknown> {
  const { settings: st, accuracy, timing } = runs;
  const modes = [1, ...st.hs];
  const accOf = (p: ProfileName, h: number) => accuracy[st.full ? `${p}/${h}` : `lan/${h}`]!;
  const anchorProfile: ProfileName = st.profiles.includes('home') ? 'home' : st.profiles[0]!;
  const anchor = accOf(anchorProfile, 1);
  const target = (final(anchor) ?? 0) - 0.02;
  // Seconds per step of every mode on every profile, from its timing run (none with --full).
  const ratesByProfile = new Map(st.full ? [] : st.profiles.map((p) => [
    p, Object.fromEntries(modes.map((h) => [label(h), measuredRate(timing[`${p}/${h}`]!)])),
  ] as const));
  const ratesOf = (p: ProfileName): Record<string, StepRate | null> | undefined => ratesByProfile.get(p);
  /** The projection's rates of mode h on profile p (null: a timing run too short to measure). */
  const ratesFor = (p: ProfileName, h: number): { sync: StepRate; mode: StepRate } | null => {
    const rates = ratesOf(p)!;
    const sync = rates.sync;
    const mode = rates[label(h)];
    return sync && mode ? { sync, mode } : null;
  };
  /** Seconds until mode h's curve on profile p first reaches `level` (null: never, or no rate). */
  const timeTo = (p: ProfileName, h: number, level: number): number | null => {
    if (st.full) return timeToTarget(accOf(p, h), level);
    const r = ratesFor(p, h);
    return r ? projectedTimeToTarget(accOf(p, h), level, st.syncWarmup, r.sync, r.mode) : null;
  };
  /** Training seconds at evaluation `e` of mode h on profile p, for the plot (null: no rate). */
  const secondsAt = (p: ProfileName, h: number, e: RunResult['evals'][number]): number | null => {
    if (st.full) return e.seconds;
    const r = ratesFor(p, h);
    return r ? projectedSeconds(e.step, warmupOf(h, st.syncWarmup), r.sync, r.mode) : null;
  };
  const perProfile = st.profiles.map((p) => {
    const tSync = timeTo(p, 1, target);
    const byH = st.hs.map((h) => ({ h, t: timeTo(p, h, target) }));
    const reached = byH.filter((x): x is { h: number; t: number } => x.t !== null).sort((x, y) => x.t - y.t);
    const first = reached[0] ?? null;
    const rates = ratesOf(p);
    return {
      profile: p, syncSeconds: tSync, byH, bestH: first?.h ?? null, speedup: tSync !== null && first ? tSync / first.t : 0,
      ...(rates ? { rates } : {}),
    };
  });
  // The best H: the fastest to the target on the anchor profile; when none reaches it, the one
  // that ends nearest to sync.
  const home = perProfile.find((p) => p.profile === anchorProfile)!;
  const bestH = home.bestH ?? [...st.hs].sort((x, y) => (final(accOf(anchorProfile, y)) ?? 0) - (final(accOf(anchorProfile, x)) ?? 0))[0]!;
  const bestRun = accOf(anchorProfile, bestH);
  const same = Math.min(best(anchor), best(bestRun));
  const sameSpeedup = (p: ProfileName) => {
    const ts = timeTo(p, 1, same);
    const th = timeTo(p, bestH, same);
    return ts !== null && th !== null ? ts / th : null;
  };
  const summary = {
    bench: 'lowcomm',
    speedup_home: r3(perProfile.find((p) => p.profile === 'home')?.speedup ?? null),
    speedup_wifi: r3(perProfile.find((p) => p.profile === 'wifi')?.speedup ?? null),
    top1_gap: r3(final(anchor) !== null && final(bestRun) !== null ? 100 * (final(anchor)! - final(bestRun)!) : null),
    bytes_per_image_sync: Math.round(anchor.bytesPerImage),
    bytes_per_image_best: Math.round(bestRun.bytesPerImage),
    best_h: bestH,
    target_top1: +(100 * target).toFixed(2),
    same_top1: +(100 * same).toFixed(2),
    speedup_home_same_top1: st.profiles.includes('home') ? r3(sameSpeedup('home')) : null,
    speedup_wifi_same_top1: st.profiles.includes('wifi') ? r3(sameSpeedup('wifi')) : null,
    images: st.steps * st.batch,
    time: st.full ? 'measured' : 'projected',
    top1: Object.fromEntries(Object.entries(accuracy).map(([k, r]) => [k.replace('/', '_h'), final(r) === null ? null : +(100 * final(r)!).toFixed(2)])),
  };
  const autoRuns = runs.auto ?? {};
  const autoPart = Object.keys(autoRuns).length ? autoSummary(autoRuns, target, (p) => {
    // The best fixed mode's time to the target on p: every mode's (projected, or measured with --full); on lan, sync's accuracy run.
    const times = (p === 'lan' ? [1] : modes).map((h) => (p === 'lan' && !st.full
      ? timeToTarget(accuracy['lan/1']!, target)
      : st.profiles.includes(p) ? timeTo(p, h, target) : null));
    const reached = times.map((t, i) => ({ t, h: p === 'lan' ? 1 : modes[i]! }))
      .filter((x): x is { t: number; h: number } => x.t !== null)
      .sort((a, b) => a.t - b.t);
    return reached[0] ?? null;
  }) : {};
  Object.assign(summary, autoPart);
  writeFileEnsuringDir(`${outDir}/lowcomm.json`, JSON.stringify({
    settings: st, target, perProfile, accuracy, timing, ...(runs.auto ? { auto: runs.auto } : {}), summary,
  }, null, 2));
  writeFileEnsuringDir(`${outDir}/lowcomm.svg`, lineChartSvg({
    title: `CIFAR-10, small CNN, 4 peers: test top-1 against training time (target ${(100 * target).toFixed(1)}%)`,
    xLabel: 'training seconds', yLabel: 'test top-1 (%)', width: 760, height: 440,
    series: [...st.profiles.flatMap((p) => modes.map((h) => ({
      name: `${p} ${h === 1 ? 'sync' : `H=${h}`}`,
      points: accOf(p, h).evals.flatMap((e) => {
        const x = secondsAt(p, h, e);
        return x === null || !Number.isFinite(x) ? [] : [[x, 100 * e.top1] as [number, number]];
      }),
    }))), ...Object.entries(autoRuns).map(([p, r]) => ({
      name: `${p} auto`,
      points: r.evals.filter((e) => Number.isFinite(e.seconds)).map((e) => [e.seconds, 100 * e.top1] as [number, number]),
    }))],
  }));
  return summary;
}

/**
 * The --auto part of the summary: per profile the auto run's measured time to the target against
 * the best fixed mode's (`bestOf`); `auto_vs_best_<p>` = best time / auto time (0: auto never
 * reached the target; null: no fixed mode did, or the profile was not run). On lan the anchor
 * is sync (`auto_vs_sync_lan`). With each run's choices of H, and its final top-1.
 */
export function autoSummary(
  auto: Record<string, RunResult>, target: number, bestOf: (p: ProfileName) => { t: number; h: number } | null,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const detail: Record<string, unknown> = {};
  for (const [p, r] of Object.entries(auto)) {
    const t = timeToTarget(r, target);
    const b = bestOf(p as ProfileName);
    const ratio = b === null ? null : t === null ? 0 : b.t / t;
    out[p === 'lan' ? 'auto_vs_sync_lan' : `auto_vs_best_${p}`] = r3(ratio);
    detail[p] = {
      seconds: t === null ? null : +t.toFixed(1), best: b ? { h: b.h, seconds: +b.t.toFixed(1) } : null, choices: r.choices ?? [],
      top1: final(r) === null ? null : +(100 * final(r)!).toFixed(2),
    };
  }
  out.auto = detail;
  return out;
}
