// The scaling bench's held-out runs: the same job as its calibration runs (bench/scaling-run.ts),
// but with the coordinator and each volunteer on a host of their own in the network test bed
// (testbed/net/bed.ts: namespaces on a 1 Gbit/s LAN or a shared 100 Mbit/s Wi-Fi medium), linked
// as Node volunteers link (direct TLS links), real processes and real transport. None of them
// enters the calibration: the simulator, fitted on the loopback runs, predicts each from its
// profile's line and delay, the transport bench's measured link and the run's own measured
// compute speed (as it does every run: the 2 cores are shared). Their largest relative error is
// the bench's `held_out_error`.
import { join } from 'node:path';
import { spawnVolunteer, type LocalVolunteer } from '../coordinator/local-volunteers.ts';
import { readMetrics } from '../coordinator/metrics.ts';
import { Testbed } from '../testbed/net/bed.ts';
import { PROFILES, type ProfileName } from '../testbed/net/profiles.ts';
import { startCoordinatorIn } from '../testbed/net/scenario.ts';
import { predictRun, runSpeed, type Calibration, type MeasuredRun } from './scaling-calibrate.ts';
import type { LinkModel } from './scaling-collective.ts';
import type { LinkKind } from './scaling-predict.ts';
import type { ModelProfile } from './scaling-profile.ts';
import { MODEL, WARMUP_STEPS, asMeasured, ringJobConfig, stepRows, summarise, within, withTails, type RunContext, type RunSummary } from './scaling-run.ts';

/** One held-out run may take this long, the test bed's start included. */
const HOST_RUN_DEADLINE_MS = 6 * 60_000;
const COORD_PORT = 8470;

const log = (line: string) => process.stderr.write(`${line}\n`);

export interface HostRun { profile: ProfileName; summary: RunSummary }

/** `n` volunteers, each on its own host of a test bed shaped by `profile`, train the calibration runs' job. */
export async function runOnHosts(profile: ProfileName, n: number, o: RunContext): Promise<HostRun> {
  const t0 = performance.now();
  const totalSteps = o.steps + WARMUP_STEPS;
  const hosts = Array.from({ length: n }, (_, i) => `h${i + 1}`);
  const jobDir = join(o.root, `hosts-${profile}-${n}-b${o.batch}`);
  const bed = await Testbed.create({ hosts: ['coord', ...hosts], profile });
  const vs: LocalVolunteer[] = [];
  try {
    const coord = await startCoordinatorIn(bed, 'coord', {
      jobDir, dataDir: o.dataDir, dataset: 'mnist', port: COORD_PORT, heartbeatMs: 1000,
      config: ringJobConfig(`scaling-hosts-${profile}-${n}-b${o.batch}`, n, o.batch, totalSteps, MODEL),
    });
    try {
      const url = `http://${bed.host('coord').ip}:${coord.port}`;
      log(`scaling: held out, ${profile}: coordinator at ${url}, ${n} volunteers on hosts ${hosts.join(', ')}`);
      for (const h of hosts) {
        vs.push(spawnVolunteer({
          url, name: `${profile}-${h}`, args: ['--no-tune', '--backend', 'webgpu'], launch: (cmd, args, opts) => bed.spawn(h, cmd, args, opts),
        }));
      }
      const allExited = Promise.all(vs.map((v) => v.exited)).then(() => { throw new Error('every volunteer exited before the job finished'); });
      await within(Promise.race([coord.finished, allExited]), HOST_RUN_DEADLINE_MS, `for ${n} hosts on ${profile} to run ${totalSteps} steps`).catch((e) => {
        throw withTails(e, coord.lines, vs);
      });
    } finally {
      for (const v of vs) v.kill('SIGKILL');
      await coord.stop();
    }
    const exits = await Promise.all(vs.map((v) => v.exited));
    const records = await readMetrics(join(jobDir, 'metrics.jsonl'));
    const aborted = records.filter((r) => r.type === 'abort').length;
    const summary = summarise(MODEL, n, o.batch, o.gradBytes, stepRows(records), aborted, exits, (performance.now() - t0) / 1000);
    return { profile, summary };
  } finally {
    await bed.close();
  }
}

/**
 * The link a held-out run's ring had, as the predictions model links: the profile's line (a
 * shared medium carries every peer's chunk of a ring step, so each link gets 1/N of it), never
 * more than the transport bench's measured Node link (`lan`: `1g`), and the profile's one-way
 * delay plus the software latency per message fitted on loopback.
 */
export function hostLink(profile: ProfileName, peers: number, measuredLan: LinkKind, cal: Calibration): LinkModel {
  const b = PROFILES[profile].bound;
  const line = b.sharedBytesPerS > 0 ? b.sharedBytesPerS / peers : Math.min(b.upBytesPerS, b.downBytesPerS);
  return { latencyS: b.oneWayMs / 1000 + cal.link.latencyS, bandwidthBytesPerS: Math.min(line, measuredLan.bytesPerS) };
}

export interface HeldOut {
  profile: ProfileName; peers: number; batch: number; measuredS: number; predictedS: number; relError: number; link: LinkModel;
  /** The same with the calibration's one speed instead of the run's own (the machine's load then counts as error too). */
  fixedSpeedPredictedS: number; fixedSpeedRelError: number;
}

/** The simulator's step time for a held-out run, calibrated on the loopback runs only. */
export function predictHeldOut(cal: Calibration, r: HostRun, profile: ModelProfile, measuredLan: LinkKind): HeldOut {
  const m: MeasuredRun = asMeasured(r.summary);
  const link = hostLink(r.profile, m.peers, measuredLan, cal);
  const predictedS = predictRun({ ...cal, link }, m, profile, runSpeed(m, cal.stragglerMean));
  const fixedSpeedPredictedS = predictRun({ ...cal, link }, m, profile);
  const rel = (p: number) => Math.abs(p - m.stepS) / m.stepS;
  return {
    profile: r.profile, peers: m.peers, batch: m.batch, measuredS: m.stepS, predictedS, relError: rel(predictedS), link,
    fixedSpeedPredictedS, fixedSpeedRelError: rel(fixedSpeedPredictedS),
  };
}
