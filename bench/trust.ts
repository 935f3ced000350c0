// `npm run bench -- trust`: does verification catch dishonest donors, and what does it cost?
// (issue 46; docs/trust.md). Two jobs of the default model on CIFAR-10 with the same seed, each
// verifying its steps at `--verify F`: one all honest, one where `--adversaries K` dishonest
// volunteers of each kind join in turn (bench/trust-run.ts; every kind of src/trust/adversary.ts
// unless --kinds says). Volunteers are Node processes on wasm, one thread each, from this machine.
//
//   npm run bench -- trust [--peers 16] [--steps 300] [--verify 0.05] [--adversaries 2] [--kinds a,b,..] [--phase-steps 30]
//                          [--batch 512] [--model small-cnn] [--dataset cifar10|mnist] [--checkpoint-every 10]
//                          [--final-eval 2000] [--churn-every 0] [--threads 1] [--seed 1] [--only honest|attacks] [--collude]
//
// Writes bench/results/trust.json and trust.svg (steps to detect each kind) and prints, last,
// {"bench":"trust","attacks":[..],"detected":[..],"steps_to_detect_max":..,"honest_flagged":..,"top1_all_honest":..,
//  "top1_with_attacks":..,"overhead":..,...}
// overhead: the honest run's audits, images recomputed over images computed; overhead_with_attacks
// adds the attack run's redone steps (undo) to its audits. --collude: the adversaries of a phase
// also audit as they cheat (src/trust/adversary.ts): they vouch for each other and accuse every
// honest member they audit, so honest_flagged says whether two colluders can frame anyone.
import { join } from 'node:path';
import { Args } from '../src/cli/args.ts';
import { DEFAULT_CACHE_DIR, ensureDataset } from '../coordinator/data/cli.ts';
import { DEFAULT_JOB, defaultWarmup } from '../coordinator/main.ts';
import { stepsPerEpoch } from '../src/train/sampler.ts';
import { ADVERSARY_KINDS, type AdversaryKind } from '../src/trust/adversary.ts';
import { tempRoot } from '../testbed/jobs.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { runTrust, type TrustRunResult } from './trust-run.ts';

const USAGE = 'usage: npm run bench -- trust [--peers 16] [--steps 300] [--verify 0.05] [--adversaries 2] [--kinds a,b,..] [--phase-steps 30] '
  + '[--batch 512] [--model small-cnn] [--dataset cifar10|mnist] [--checkpoint-every 10] [--final-eval 2000] [--churn-every 0] [--threads 1] '
  + '[--seed 1] [--only honest|attacks] [--collude]';

export async function main(argv: string[]): Promise<void> {
  const a = new Args(argv);
  const peers = a.int('peers', 16, 3);
  const steps = a.int('steps', 300, 10);
  const verify = a.num('verify', 0.05);
  const adversaries = a.int('adversaries', 2, 1);
  const kindsArg = a.str('kinds', ADVERSARY_KINDS.join(','));
  const phaseSteps = a.int('phase-steps', 30, 1);
  const batch = a.int('batch', DEFAULT_JOB.batch, 1);
  const model = a.str('model', 'small-cnn');
  const dataset = a.oneOf<'cifar10' | 'mnist'>('dataset', ['cifar10', 'mnist'], 'cifar10');
  const checkpointEvery = a.int('checkpoint-every', 10, 1);
  const finalEval = a.int('final-eval', 2000, 1);
  const churnEvery = a.int('churn-every', 0, 0);
  const threads = a.int('threads', 1, 1);
  const seed = a.int('seed', 1, 0);
  const only = a.oneOf<'both' | 'honest' | 'attacks'>('only', ['both', 'honest', 'attacks'], 'both');
  const collude = a.flag('collude');
  a.rejectUnknown(USAGE);
  if (!(verify > 0 && verify <= 1)) throw new Error(`--verify must be in (0, 1], got ${verify}`);
  const kinds = kindsArg.split(',').map((k) => k.trim()).filter(Boolean);
  const unknown = kinds.filter((k) => !(ADVERSARY_KINDS as readonly string[]).includes(k));
  if (unknown.length) throw new Error(`--kinds: unknown ${unknown.join(', ')}; choose from ${ADVERSARY_KINDS.join(', ')}`);
  if (adversaries >= peers - 2) {
    throw new Error(`--adversaries ${adversaries} needs --peers above ${adversaries + 2} (audits need two honest members to settle a dispute)`);
  }

  const manifest = await ensureDataset(dataset, DEFAULT_CACHE_DIR, { progress: false });
  const data = { dataDir: DEFAULT_CACHE_DIR, manifest };
  const perEpoch = stepsPerEpoch(manifest.splits.train.samples, batch);
  // The default job's optimiser (npm start), its warm-up scaled to the run's length as npm start does.
  const warmupSteps = Math.min(defaultWarmup('lars', null, perEpoch, steps), steps - 1);
  const optimizer = { kind: 'lars', lr: DEFAULT_JOB.larsLr, warmupSteps, biasTrust: 'layer' };
  const root = await tempRoot('trust-bench');
  const log = (l: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${l}\n`);
  const common = {
    data, peers, steps, batch, model, verify, optimizer, adversaries, collude, phaseSteps, checkpointEvery, evalSamples: 200,
    finalEvalSamples: finalEval, threads, churnEvery, seed, log,
  };
  let honest: TrustRunResult | null = null;
  let attacked: TrustRunResult | null = null;
  try {
    if (only !== 'attacks') {
      log(`honest run: ${peers} volunteers, ${steps} steps, verify ${verify}`);
      honest = await runTrust({ ...common, jobDir: join(root.dir, 'honest'), kinds: [] });
      log(`honest run: top-1 ${honest.top1}, ${honest.audits} audits, ${honest.honestFlagged.length} flagged, ${honest.wallS.toFixed(0)} s`);
    }
    if (only !== 'honest') {
      log(`attack run: ${peers} volunteers, ${adversaries} adversaries of each of ${kinds.join(', ')} in turn`);
      attacked = await runTrust({ ...common, jobDir: join(root.dir, 'attacks'), kinds: kinds as AdversaryKind[] });
      log(`attack run: top-1 ${attacked.top1}, ${attacked.wallS.toFixed(0)} s`);
    }
  } finally {
    await root.remove();
  }
  const ran = attacked?.outcomes.filter((o) => !o.skipped) ?? [];
  const detectSteps = ran.flatMap((o) => o.each.map((e) => e.stepsToDetect)).filter((s): s is number => s !== null);
  const round = (x: number | null, d = 4) => (x === null ? null : Number(x.toFixed(d)));
  const imagesOver = (r: TrustRunResult | null, extra: number) => (r && r.computedImages > 0 ? (r.auditedImages + extra) / r.computedImages : null);
  const summary = {
    bench: 'trust',
    attacks: ran.map((o) => o.kind),
    detected: ran.filter((o) => o.detected).map((o) => o.kind),
    halted: ran.filter((o) => o.halted).map((o) => o.kind),
    skipped: attacked?.outcomes.filter((o) => o.skipped).map((o) => o.kind) ?? [],
    steps_to_detect_max: ran.length && ran.every((o) => o.detected) ? Math.max(...detectSteps) : null,
    steps_to_detect: Object.fromEntries(ran.map((o) => [o.kind, o.each.map((e) => e.stepsToDetect)])),
    honest_flagged: (honest?.honestFlagged.length ?? 0) + (attacked?.honestFlagged.length ?? 0),
    top1_all_honest: round(honest?.top1 ?? null),
    top1_with_attacks: round(attacked?.top1 ?? null),
    overhead: round(imagesOver(honest, 0)),
    overhead_with_attacks: round(imagesOver(attacked, (attacked?.redoneSteps ?? 0) * batch)),
    redone_steps: attacked?.redoneSteps ?? null,
    audits_honest: honest?.audits ?? null,
    directed_honest: honest?.directed ?? null,
    one_checksum: (honest?.oneChecksum ?? true) && (attacked?.oneChecksum ?? true),
    peers, steps, verify, adversaries, collude, batch, model, dataset, phase_steps: phaseSteps, churn_every: churnEvery,
    wall_s: Math.round((honest?.wallS ?? 0) + (attacked?.wallS ?? 0)),
  };
  const here = join(import.meta.dirname, 'results');
  writeFileEnsuringDir(join(here, 'trust.json'), JSON.stringify({ summary, honest, attacked }, null, 2));
  writeFileEnsuringDir(join(here, 'trust.svg'), barChartSvg({
    title: `Steps from an adversary's first step to its conviction (verify ${verify}, ${peers} peers)`, yLabel: 'steps',
    categories: ran.map((o) => o.kind),
    series: Array.from({ length: adversaries }, (_, k) => ({ name: `adversary ${k + 1}`, values: ran.map((o) => o.each[k]?.stepsToDetect ?? NaN) })),
  }));
  console.log(JSON.stringify(summary));
}
