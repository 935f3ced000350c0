// `npm run bench -- lowcomm`: sync SGD against low-communication rounds (H = 8 and H = 32) on
// the network test bed's `home` and `wifi` link profiles (test/net/profiles.ts): 4 peers on
// their own hosts, the small CNN on CIFAR-10, the same images in every run. For each profile:
// the training time until test top-1 first reaches the target, and the top-1 after all images.
//
// The target is the sync run's final top-1 on `home` minus 2 points (sync's accuracy does not
// depend on the link, only its time does); a run that never reaches it has no time. Speedup on
// a profile: sync's time to target over the best H's. The top-1 gap: sync's final top-1 minus
// the best H's, after the same images (the best H: the fastest to target on `home`).
//
//   npm run bench -- lowcomm [--steps 96] [--batch 128] [--profiles home,wifi] [--h 8,32]
//
// Writes bench/results/lowcomm.json and lowcomm.svg (top-1 against training time) and prints
// {"bench":"lowcomm","speedup_home":..,"speedup_wifi":..,"top1_gap":..,"bytes_per_image_sync":..,"bytes_per_image_best":..,...}
import { DEFAULT_CACHE_DIR, ensureDataset } from '../coordinator/data/cli.ts';
import { Args } from '../coordinator/args.ts';
import { OUTER_DEFAULTS } from '../src/optim/index.ts';
import { tempRoot } from '../test/distributed/helpers.ts';
import type { ProfileName } from '../test/net/profiles.ts';
import { runOnce, timeToTarget, type RunResult, type RunSpec } from './lowcomm-run.ts';
import { lineChartSvg } from './plot-lines.ts';
import { writeFileEnsuringDir } from './plot.ts';

export async function main(argv: string[]): Promise<void> {
  const a = new Args(argv);
  const steps = a.int('steps', 96, 1);
  const batch = a.int('batch', 128, 4);
  const lr = a.num('lr', 0.5, (v) => v > 0, 'a positive number');
  const profiles = a.str('profiles', 'home,wifi').split(',') as ProfileName[];
  const hs = a.str('h', '8,32').split(',').map(Number);
  const evalSamples = a.int('eval-samples', 1000, 1);
  const outerLr = a.num('outer-lr', OUTER_DEFAULTS.lr, (v) => v > 0 && v <= 10, 'a number in (0, 10]');
  const syncWarmup = a.int('sync-warmup', 0, 0);
  const outerMomentum = a.num('outer-momentum', OUTER_DEFAULTS.momentum, (v) => v >= 0 && v < 1, 'a number in [0, 1)');
  a.rejectUnknown('npm run bench -- lowcomm [--steps 96] [--batch 128] [--lr 0.5] [--profiles home,wifi] [--h 8,32] [--eval-samples 1000] [--outer-lr X] [--outer-momentum M] [--sync-warmup N]');
  const known: readonly string[] = ['home', 'wifi', 'lan'];
  const bad = profiles.filter((p) => !known.includes(p));
  if (bad.length) throw new Error(`--profiles takes home, wifi, lan; got ${bad.join(',')}`);
  if (!hs.every((h) => Number.isInteger(h) && h > 1)) throw new Error(`--h takes integers > 1; got ${hs.join(',')}`);
  await ensureDataset('cifar10');
  const root = await tempRoot('lowcomm');
  const runs: RunResult[] = [];
  try {
    for (const profile of profiles) {
      for (const syncEvery of [1, ...hs]) {
        const spec: RunSpec = { profile, syncEvery, steps, globalBatch: batch, lr, outerLr, outerMomentum, syncWarmup, evalEvery: 16, evalSamples, seed: 5 };
        process.stderr.write(`lowcomm: ${profile}, ${syncEvery === 1 ? 'sync' : `H = ${syncEvery}`}, ${steps} steps of ${batch} images ...\n`);
        const r = await runOnce(spec, { root: root.dir, dataDir: DEFAULT_CACHE_DIR, log: (l) => process.stderr.write(`${l}\n`) });
        const last = r.evals[r.evals.length - 1];
        process.stderr.write(`  top-1 ${last ? (last.top1 * 100).toFixed(1) : '-'}% after ${last?.images ?? 0} images, ${last?.seconds.toFixed(0) ?? '-'} s of training, ${(r.bytesPerImage / 1000).toFixed(1)} KB per image\n`);
        runs.push(r);
      }
    }
  } finally {
    await root.remove();
  }
  const run = (p: ProfileName, h: number) => runs.find((r) => r.profile === p && r.syncEvery === h);
  const final = (r: RunResult | undefined) => r?.evals[r.evals.length - 1]?.top1 ?? null;
  const anchor = run('home', 1) ?? run(profiles[0]!, 1);
  const target = (final(anchor) ?? 0) - 0.02;
  const perProfile = profiles.map((p) => {
    const sync = run(p, 1)!;
    const tSync = timeToTarget(sync, target);
    const hRuns = hs.map((h) => ({ h, t: timeToTarget(run(p, h)!, target) }));
    const reached = hRuns.filter((x): x is { h: number; t: number } => x.t !== null).sort((x, y) => x.t - y.t);
    const best = reached[0] ?? null;
    return { profile: p, syncSeconds: tSync, byH: hRuns, bestH: best?.h ?? null, speedup: tSync !== null && best ? tSync / best.t : 0 };
  });
  const home = perProfile.find((p) => p.profile === 'home') ?? perProfile[0]!;
  const bestH = home.bestH ?? hs[0]!;
  const bestRun = run(home.profile, bestH);
  const r3 = (x: number | null) => (x === null ? null : +x.toFixed(3));
  const summary = {
    bench: 'lowcomm',
    speedup_home: r3(perProfile.find((p) => p.profile === 'home')?.speedup ?? null),
    speedup_wifi: r3(perProfile.find((p) => p.profile === 'wifi')?.speedup ?? null),
    top1_gap: r3(final(anchor) !== null && final(bestRun) !== null ? 100 * (final(anchor)! - final(bestRun)!) : null),
    bytes_per_image_sync: Math.round(anchor?.bytesPerImage ?? 0),
    bytes_per_image_best: Math.round(bestRun?.bytesPerImage ?? 0),
    best_h: bestH,
    target_top1: +(100 * target).toFixed(2),
    images: steps * batch,
    top1: Object.fromEntries(runs.map((r) => [`${r.profile}_h${r.syncEvery}`, final(r) === null ? null : +(100 * final(r)!).toFixed(2)])),
  };
  writeFileEnsuringDir('bench/results/lowcomm.json', JSON.stringify({ settings: { steps, batch, lr, outerLr, outerMomentum, syncWarmup, evalSamples, peers: 4, model: 'small-cnn', dataset: 'cifar10' }, target, perProfile, runs, summary }, null, 2));
  writeFileEnsuringDir('bench/results/lowcomm.svg', lineChartSvg({
    title: `CIFAR-10, small CNN, 4 peers: test top-1 against training time (target ${(100 * target).toFixed(1)}%)`, xLabel: 'training seconds', yLabel: 'test top-1 (%)', width: 760, height: 440,
    series: runs.map((r) => ({ name: `${r.profile} ${r.syncEvery === 1 ? 'sync' : `H=${r.syncEvery}`}`, points: r.evals.map((e) => [e.seconds, 100 * e.top1] as [number, number]) })),
  }));
  console.log(JSON.stringify(summary));
}


