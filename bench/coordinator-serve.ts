// The coordinator bench's coordinator: one process (the bench pins it to one core), running a
// job on the given folder and data with generous per-address limits (the simulated volunteers
// come from a few loopback addresses). Prints "listening <url>" once it serves, answers 'turns'
// over IPC with its turns between steps since the last ask (Driver.turns); stops on SIGTERM.
//   node ... bench/coordinator-serve.ts <options JSON>
import { runJob } from '../coordinator/run.ts';
import type { Manifest } from '../src/data/manifest.ts';

interface ServeOptions { jobDir: string; dataDir: string; manifest: Manifest; config: Record<string, unknown>; heartbeatMs: number }

const o = JSON.parse(process.argv[2] ?? '{}') as ServeOptions;
const job = await runJob({
  jobDir: o.jobDir, config: o.config, dataDir: o.dataDir, manifest: o.manifest, heartbeatMs: o.heartbeatMs, evalSamples: 16,
  rateLimits: { requests: { perSecond: 100_000, burst: 100_000 }, joins: { perSecond: 100_000, burst: 100_000 } },
  ice: { stun: false }, log: (l) => { if (/silent|evict|abort|paused|error/i.test(l)) process.stderr.write(`${l}\n`); },
});
process.stdout.write(`listening ${job.url}\n`);
// The bench asks for the coordinator's turns between steps since it last asked (Driver.turns).
process.on('message', (m: unknown) => { if (m === 'turns') process.send?.({ turns: job.driver.turns.take() }); });
process.once('SIGTERM', () => void job.close().then(() => process.exit(0)));
