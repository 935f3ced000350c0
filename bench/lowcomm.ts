// `npm run bench -- lowcomm`: sync SGD against low-communication rounds (H = 8 and H = 32) on
// the network test bed's `home` and `wifi` link profiles (testbed/net/profiles.ts): 4 peers on
// their own hosts, the small CNN on CIFAR-10, the same images in every run (SGD by default, the
// inner optimiser of rounds too; rounds with plain averaging, BENCH_OUTER). For each profile:
// the training time until test top-1 first reaches the target, and the top-1 after all images.
//
// Two measured parts (the default): every mode trains the whole length once on the fast `lan`
// profile (the accuracy run: top-1 against steps; sync's bits do not depend on the link), and
// every mode runs a window of steps on each slow profile (the timing run: seconds per step
// there). A mode's time to target on a profile is the steps its accuracy run needed times its
// measured seconds per step there (bench/lowcomm-project.ts). `--full` instead trains every
// mode the whole length on every profile and reads the time off the clock (sync on `home`
// takes about 5.5 s a step: an hour and more for a few epochs).
//
// The target is the sync run's final top-1 minus 2 points; a run that never reaches it has no
// time. Speedup on a profile: sync's time to target over the best H's. The top-1 gap: sync's
// final top-1 minus the best H's, after the same images (the best H: the fastest to target on
// `home`), each evaluated on the whole test split (--final-eval-samples).
//
// `--auto` also trains the whole length with syncEvery "auto" (the coordinator picks H from the
// ring it measures: coordinator/sync-auto.ts) on each profile and on `lan`, its time to the
// target read off the clock, against the best fixed mode's there (on lan: against sync's).
//
//   npm run bench -- lowcomm [--steps 780] [--batch 128] [--profiles home,wifi] [--h 8,32] [--full] [--auto]
//
// Writes bench/results/lowcomm.json and lowcomm.svg (top-1 against training time) and prints
// {"bench":"lowcomm","speedup_home":..,"speedup_wifi":..,"top1_gap":..,"bytes_per_image_sync":..,"bytes_per_image_best":..,...}
// (with --auto also "auto_vs_best_wifi", "auto_vs_best_home", "auto_vs_sync_lan": best fixed time / auto's time, goals >= 0.9)
import { readFile } from 'node:fs/promises';
import { DEFAULT_CACHE_DIR, ensureDataset } from '../coordinator/data/cli.ts';
import { Args } from '../src/cli/args.ts';
import { readCarry, START_OUTER } from '../coordinator/main.ts';
import { WIRE_FORMATS, type WireFormat } from '../src/protocol/frames.ts';
import { tempRoot } from '../testbed/jobs.ts';
import type { ProfileName } from '../testbed/net/profiles.ts';
import { timingSteps } from './lowcomm-project.ts';
import { modeLabel as label, report, type LowcommRuns, type LowcommSettings } from './lowcomm-report.ts';
import { runOnce, type RunResult, type RunSpec } from './lowcomm-run.ts';

/**
 * The bench's rounds: as `npm start --sync-every H` makes them (START_OUTER: plain averaging,
 * inner momentum carried with rho 0.75). Measured on lan at H = 8 with SGD and each peer's own
 * inner momentum (2 epochs, final top-1): outer 1 / 0 57.2%, 0.7 / 0 55.2%, 1.5 / 0 53.9%,
 * 1 / Nesterov 0.5 55.9%; DiLoCo's 0.7 / 0.9 is meant for rounds of hundreds of steps.
 */
const BENCH_OUTER = START_OUTER;

const USAGE = 'npm run bench -- lowcomm [--steps 780] [--batch 128] [--optimizer sgd|lars] [--wire f32|f16|bf16] [--lr 0.04 (lars: 0.5)] [--warmup 32] '
  + '[--profiles home,wifi] [--h 8,32] [--full] [--time-steps 24] [--eval-every 65] [--eval-samples 2000] [--final-eval-samples 10000] '
  + '[--outer-lr 1] [--outer-momentum 0] [--carry 0.75|own] [--sync-warmup N] [--auto] [--from bench/results/lowcomm.json [--retime]]';

export async function main(argv: string[]): Promise<void> {
  const a = new Args(argv);
  const from = a.str('from', '');
  if (from) {
    const retime = a.flag('retime');
    a.rejectUnknown(USAGE);
    const saved = JSON.parse(await readFile(from, 'utf8')) as Partial<LowcommRuns>;
    if (!saved.settings || !saved.accuracy || !saved.timing) {
      throw new Error(`${from} is not a results file of this bench (it needs settings, accuracy and timing): run npm run bench -- lowcomm first`);
    }
    const st: Partial<LowcommSettings> = saved.settings; // files from before profiles and hs were kept: the defaults
    const settings = { ...saved.settings, profiles: st.profiles ?? ['home', 'wifi'], hs: st.hs ?? [8, 32] };
    let timing = saved.timing;
    if (retime) {
      if (settings.full) throw new Error(`${from} was trained with --full: it has no timing windows to measure again`);
      await ensureDataset('cifar10');
      const root = await tempRoot('lowcomm');
      try {
        timing = Object.fromEntries(await timingRuns(
          baseOf(settings), settings.profiles, [1, ...settings.hs], settings.timeSteps, (spec, what) => goRun(spec, what, root.dir),
        ));
      } finally {
        await root.remove();
      }
    }
    console.log(JSON.stringify(report({ settings, accuracy: saved.accuracy, timing, ...(saved.auto ? { auto: saved.auto } : {}) })));
    return;
  }
  const steps = a.int('steps', 780, 1);
  const batch = a.int('batch', 128, 4);
  const optimizer = a.oneOf<'sgd' | 'lars'>('optimizer', ['sgd', 'lars'], 'sgd');
  const wire = a.oneOf<WireFormat>('wire', WIRE_FORMATS, 'f32');
  const lr = a.num('lr', optimizer === 'sgd' ? 0.04 : 0.5, (v) => v > 0, 'a positive number');
  const warmupSteps = a.int('warmup', 32, 0);
  const profiles = a.str('profiles', 'home,wifi').split(',') as ProfileName[];
  const hs = a.str('h', '8,32').split(',').map(Number);
  const full = a.flag('full');
  const auto = a.flag('auto');
  const timeSteps = a.int('time-steps', 24, 2);
  const evalEvery = a.int('eval-every', 65, 1);
  const evalSamples = a.int('eval-samples', 2000, 1);
  const finalEvalSamples = a.int('final-eval-samples', 10_000, 1);
  const outerLr = a.num('outer-lr', BENCH_OUTER.lr, (v) => v > 0 && v <= 10, 'a number in (0, 10]');
  const syncWarmup = a.int('sync-warmup', 0, 0);
  const outerMomentum = a.num('outer-momentum', BENCH_OUTER.momentum, (v) => v >= 0 && v < 1, 'a number in [0, 1)');
  const carry = readCarry(a.str('carry', String(BENCH_OUTER.carry)), '--carry');
  a.rejectUnknown(USAGE);
  const known: readonly string[] = ['home', 'wifi', 'lan'];
  const bad = profiles.filter((p) => !known.includes(p));
  if (bad.length) throw new Error(`--profiles takes home, wifi, lan; got ${bad.join(',')}`);
  if (!hs.every((h) => Number.isInteger(h) && h > 1)) throw new Error(`--h takes integers > 1; got ${hs.join(',')}`);
  await ensureDataset('cifar10');
  const root = await tempRoot('lowcomm');
  const base = {
    steps, globalBatch: batch, optimizer, wire, lr, warmupSteps, outerLr, outerMomentum, ...(carry !== undefined ? { carry } : {}),
    syncWarmup, evalEvery, evalSamples, finalEvalSamples, seed: 5,
  };
  const modes = [1, ...hs];
  const go = (spec: RunSpec, what: string): Promise<RunResult> => goRun(spec, what, root.dir);
  const autoRuns = new Map<string, RunResult>();
  const accuracy = new Map<string, RunResult>(); // `${profile}/${h}`
  const timing = new Map<string, RunResult>();
  try {
    if (full) {
      for (const profile of profiles) for (const h of modes) accuracy.set(`${profile}/${h}`, await go({ ...base, profile, syncEvery: h }, 'whole length'));
    } else {
      for (const h of modes) accuracy.set(`lan/${h}`, await go({ ...base, profile: 'lan', syncEvery: h }, 'accuracy run'));
      for (const [k, r] of await timingRuns(base, profiles, modes, timeSteps, go)) timing.set(k, r);
    }
    // syncEvery "auto" picks H as it goes: each run is the whole length, timed by the clock.
    if (auto) {
      for (const profile of [...profiles.filter((p) => p !== 'lan'), 'lan' as const]) {
        autoRuns.set(profile, await go({ ...base, profile, syncEvery: 'auto' }, 'auto, whole length'));
      }
    }
  } finally {
    await root.remove();
  }
  const settings: LowcommSettings = {
    steps, batch, optimizer, wire, lr, warmupSteps, outerLr, outerMomentum, ...(carry !== undefined ? { carry } : {}),
    syncWarmup, evalEvery, evalSamples, finalEvalSamples, timeSteps, full, profiles, hs, peers: 4, model: 'small-cnn', dataset: 'cifar10',
  };
  console.log(JSON.stringify(report({
    settings, accuracy: Object.fromEntries(accuracy), timing: Object.fromEntries(timing), ...(auto ? { auto: Object.fromEntries(autoRuns) } : {}),
  })));
}

type Base = Omit<RunSpec, 'profile' | 'syncEvery'>;

/** The run settings of saved bench settings (what main builds from its flags). */
function baseOf(st: LowcommSettings): Base {
  return {
    steps: st.steps, globalBatch: st.batch, optimizer: st.optimizer, wire: st.wire as WireFormat, lr: st.lr, warmupSteps: st.warmupSteps, outerLr: st.outerLr,
    outerMomentum: st.outerMomentum, ...(st.carry !== undefined ? { carry: st.carry } : {}), syncWarmup: st.syncWarmup, evalEvery: st.evalEvery,
    evalSamples: st.evalSamples, finalEvalSamples: st.finalEvalSamples, seed: 5,
  };
}

/** The timing windows: every mode for a few steps (at least three rounds) on every slow profile, keyed `${profile}/${H}`. */
async function timingRuns(
  base: Base, profiles: readonly ProfileName[], modes: readonly number[], timeSteps: number, go: (spec: RunSpec, what: string) => Promise<RunResult>,
): Promise<[string, RunResult][]> {
  const out: [string, RunResult][] = [];
  for (const profile of profiles) {
    for (const h of modes) {
      const n = timingSteps(h, timeSteps);
      const spec: RunSpec = { ...base, profile, syncEvery: h, steps: n, syncWarmup: 0, evalEvery: n, evalSamples: 100, finalEvalSamples: 100 };
      out.push([`${profile}/${h}`, await go(spec, 'timing run')]);
    }
  }
  return out;
}

/** One run, with what it reached in the log. */
async function goRun(spec: RunSpec, what: string, root: string): Promise<RunResult> {
  process.stderr.write(`lowcomm: ${spec.profile}, ${label(spec.syncEvery)}, ${what}: ${spec.steps} steps of ${spec.globalBatch} images ...\n`);
  const r = await runOnce(spec, { root, dataDir: DEFAULT_CACHE_DIR, log: (l) => process.stderr.write(`${l}\n`) });
  const last = r.evals[r.evals.length - 1];
  const chose = r.choices ? `, H chosen: ${r.choices.map((c) => `${c.h} after step ${c.step}`).join(', ') || 'none (sync)'}` : '';
  process.stderr.write(`  top-1 ${last ? (last.top1 * 100).toFixed(1) : '-'}% after ${last?.images ?? 0} images, `
    + `${r.steps[r.steps.length - 1]?.seconds.toFixed(0) ?? '-'} s of training, ${(r.bytesPerImage / 1000).toFixed(1)} KB per image${chose}\n`);
  return r;
}
