// One run of the trust bench (bench/trust.ts): a job that verifies its steps (`verify`), trained
// by Node volunteers on wasm from this machine, all honest, or with `adversaries` dishonest ones
// (`--adversary KIND`, src/trust/adversary.ts) joining for each kind in turn. A phase lasts until
// its adversaries are convicted, or `phaseSteps` steps after they joined (then they are stopped
// and the kind counts as undetected). A kind that halts the job (a liar whose lies could not be
// pinned on it: coordinator/hop-check.ts) is stopped and the job resumed, as its owner would. With
// `churnEvery`, one honest volunteer leaves (SIGTERM) and a new one joins every so many steps.
import { spawnVolunteer, type LocalVolunteer } from '../coordinator/local-volunteers.ts';
import { runJob } from '../coordinator/run.ts';
import type { Manifest } from '../src/data/manifest.ts';
import type { LiveEvent, MetricRecord } from '../src/protocol/messages.ts';
import type { AdversaryKind } from '../src/trust/adversary.ts';
import { metricsOf, stepsLogged, stopAll } from '../testbed/jobs.ts';

export interface TrustRunOptions {
  jobDir: string;
  data: { dataDir: string; manifest: Manifest };
  /** Volunteers at any time: honest ones, plus (in an attack phase) the adversaries in place of as many of them. */
  peers: number;
  steps: number;
  batch: number;
  model: string;
  verify: number;
  optimizer: Record<string, unknown>;
  /** Attack phases, in order (empty: the all-honest run). */
  kinds: readonly AdversaryKind[];
  adversaries: number;
  /** The adversaries also audit as they cheat (vouching for each other, accusing the honest they audit). */
  collude: boolean;
  phaseSteps: number;
  checkpointEvery: number;
  evalSamples: number;
  finalEvalSamples: number;
  threads: number;
  churnEvery: number;
  seed: number;
  log: (line: string) => void;
}

export interface AdversaryOutcome {
  name: string;
  /** The first step (numbered from 1) it computed, from its own log. */
  firstStep: number | null;
  /** The step (numbered from 1) verification convicted it in. */
  convictedAt: number | null;
  /** Steps from its first to its conviction, both counted (1: caught in the first step it cheated). */
  stepsToDetect: number | null;
  reason: string | null;
}

export interface AttackOutcome {
  kind: AdversaryKind;
  /** Every adversary of the phase was convicted. */
  detected: boolean;
  /** The job halted in the phase (a sum that did not add up twice): nothing wrong committed, nobody named. */
  halted: boolean;
  /** The phase never started: the job ended first. */
  skipped: boolean;
  each: AdversaryOutcome[];
}

export interface TrustRunResult {
  /** Top-1 of the job's final evaluation (fraction), null when none ran. */
  top1: number | null;
  stepsCommitted: number;
  wallS: number;
  /** Honest volunteers verification convicted (should be none). */
  honestFlagged: { name: string; reason: string }[];
  outcomes: AttackOutcome[];
  audits: number;
  /** Of the audits, those given to suspects (audits.ts directed audits). */
  directed: number;
  auditedImages: number;
  computedImages: number;
  disputes: number;
  /** Steps committed more than once (an undo went back over them): work redone. */
  redoneSteps: number;
  /** Every committed step's members reported one checksum. */
  oneChecksum: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A volunteer's log line of a step it computes (its number, from 1). */
const COMPUTES = /volunteer: step (\d+) computes/;

export async function runTrust(o: TrustRunOptions): Promise<TrustRunResult> {
  const t0 = Date.now();
  const events: LiveEvent[] = [];
  const convicted = new Map<string, { step: number; reason: string }>();
  let stepEvents = 0;
  let halted = false;
  const job = await runJob({
    jobDir: o.jobDir, dataDir: o.data.dataDir, manifest: o.data.manifest, evalSamples: o.evalSamples, finalEvalSamples: o.finalEvalSamples,
    heartbeatMs: 1000,
    config: {
      name: 'trust', model: o.model, dataset: o.data.manifest.dataset, globalBatch: o.batch, steps: o.steps, optimizer: o.optimizer,
      evalEvery: 0, checkpointEvery: o.checkpointEvery, keepCheckpoints: 100, seed: o.seed, minPeers: o.peers - (o.kinds.length ? o.adversaries : 0),
      verify: o.verify, stealFraction: 0,
    },
    timeouts: { stepMs: 120_000, admitMs: 120_000, evalMs: 300_000 },
    // Every volunteer comes from 127.0.0.1.
    rateLimits: { requests: { perSecond: 2000, burst: 10_000 }, joins: { perSecond: 100, burst: 200 } },
    log: (l) => { if (/verification|convicted|undone|halt/i.test(l)) o.log(`coordinator: ${l}`); },
    onEvent: (e) => {
      events.push(e);
      if (e.type === 'step') stepEvents++;
      if (e.type === 'halted') halted = true;
      if (e.type === 'verification' && e.convicted) for (const n of e.convicted) convicted.set(n, { step: e.step, reason: e.reason ?? '' });
    },
  });
  let finished = false;
  void job.driver.finished.then(() => { finished = true; });
  /** POST /api/admin/resume, as the owner would once the cause of a halt is gone. */
  const resume = async (): Promise<void> => {
    halted = false;
    await fetch(`${job.url}/api/admin/resume`, { method: 'POST', headers: { authorization: `Bearer ${job.adminToken}` } });
  };
  const live: LocalVolunteer[] = [];
  const all: LocalVolunteer[] = [];
  const start = (name: string, extra: string[] = []): LocalVolunteer => {
    const v = spawnVolunteer({
      url: job.url, name, args: ['--no-tune', '--rejoin-for', extra.length ? '0' : '120', '--backend', 'wasm', '--threads', String(o.threads), ...extra],
    });
    live.push(v);
    all.push(v);
    return v;
  };
  const honest = o.peers - (o.kinds.length ? o.adversaries : 0);
  for (let i = 0; i < honest; i++) start(`h${i}`);
  let churned = 0;
  const churn = async (): Promise<void> => {
    if (o.churnEvery <= 0 || stepEvents < (churned + 1) * o.churnEvery) return;
    churned++;
    // Honest volunteers are h0, h1, ...: not 'half-0', an adversary (run 6 of docs/results/trust.json churned one out).
    const honestLive = live.filter((v) => /^h\d+$/.test(v.name) && v.child.exitCode === null);
    const leaver = honestLive[(churned * 7) % Math.max(1, honestLive.length)];
    if (!leaver) return;
    o.log(`churn: ${leaver.name} leaves, h${honest + churned - 1} joins`);
    leaver.kill('SIGTERM');
    start(`h${honest + churned - 1}`);
  };
  const outcomes: AttackOutcome[] = [];
  try {
    // The honest ring trains a few steps first (the adversaries join a running job).
    const warm = Math.min(o.steps, Math.max(2, o.checkpointEvery));
    while (!finished && stepEvents < warm) {
      await churn();
      await sleep(200);
    }
    for (const kind of o.kinds) {
      if (finished) {
        outcomes.push({ kind, detected: false, halted: false, skipped: true, each: [] });
        continue;
      }
      o.log(`phase ${kind}: ${o.adversaries} adversar${o.adversaries === 1 ? 'y joins' : 'ies join'} at step ${stepEvents}`);
      const advs = Array.from({ length: o.adversaries }, (_, k) => start(`${kind}-${k}`, ['--adversary', kind, ...(o.collude ? ['--collude'] : [])]));
      const names = advs.map((v) => v.name);
      const from = stepEvents;
      for (;;) {
        await churn();
        const computing = advs.filter((v) => stepsLogged(v.lines, COMPUTES).length > 0).length;
        const caught = names.every((n) => convicted.has(n));
        // The phase's clock starts once every adversary computed a step (it took a place in the ring).
        const since = computing === advs.length ? stepEvents - from : 0;
        if (caught || finished || since >= o.phaseSteps || advs.every((v) => v.child.exitCode !== null) || halted) break;
        if (Date.now() - t0 > 6 * 3600_000) break;
        await sleep(200);
      }
      // A halted job: the owner's way out is to stop the ones it suspects, then resume it.
      const phaseHalted = halted;
      for (const v of advs) v.kill('SIGTERM');
      await Promise.all(advs.map((v) => v.exited));
      if (phaseHalted) {
        await resume();
        o.log(`phase ${kind}: the job halted; its adversaries stopped and the job resumed`);
      }
      const each = advs.map((v): AdversaryOutcome => {
        const first = stepsLogged(v.lines, COMPUTES)[0] ?? null;
        const c = convicted.get(v.name);
        return {
          name: v.name, firstStep: first, convictedAt: c?.step ?? null, stepsToDetect: c && first !== null ? c.step - first + 1 : null,
          reason: c?.reason ?? null,
        };
      });
      outcomes.push({ kind, detected: each.every((e) => e.convictedAt !== null), halted: phaseHalted, skipped: false, each });
      o.log(`phase ${kind}: ${each.map((e) => `${e.name} ${e.convictedAt === null ? 'not convicted' : `convicted in step ${e.convictedAt} `
        + `(${e.stepsToDetect} step${e.stepsToDetect === 1 ? '' : 's'} after it began)`}`).join('; ')}`);
    }
    while (!finished) {
      await churn();
      if (halted) await resume();
      if (Date.now() - t0 > 6 * 3600_000) throw new Error('the trust run did not finish within 6 hours');
      await sleep(500);
    }
    await job.close();
  } finally {
    await stopAll(all);
    if (!finished) await job.close().catch(() => undefined);
  }
  const records: MetricRecord[] = await metricsOf(o.jobDir);
  const steps = records.filter((r): r is Extract<MetricRecord, { type: 'step' }> => r.type === 'step');
  const seen = new Map<number, number>();
  for (const r of steps) seen.set(r.step, (seen.get(r.step) ?? 0) + 1);
  const tally = records.filter((r): r is Extract<MetricRecord, { type: 'verification' }> => r.type === 'verification').at(-1);
  const finalEval = records.filter((r): r is Extract<MetricRecord, { type: 'eval' }> => r.type === 'eval').at(-1);
  const adversaryNames = new Set(outcomes.flatMap((a) => a.each.map((e) => e.name)));
  return {
    top1: finalEval ? finalEval.top1 : null,
    stepsCommitted: Math.max(0, ...steps.map((r) => r.step)),
    wallS: (Date.now() - t0) / 1000,
    honestFlagged: [...convicted.entries()].filter(([n]) => !adversaryNames.has(n)).map(([name, c]) => ({ name, reason: c.reason })),
    outcomes,
    audits: tally?.audits ?? 0, directed: tally?.directed ?? 0, auditedImages: tally?.auditedImages ?? 0, computedImages: tally?.computedImages ?? 0,
    disputes: tally?.disputes ?? 0,
    redoneSteps: [...seen.values()].reduce((a, n) => a + n - 1, 0),
    oneChecksum: steps.every((r) => new Set(r.peers.map((p) => p.checksum)).size === 1),
  };
}
