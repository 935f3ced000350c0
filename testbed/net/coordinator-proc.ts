// A coordinator as its own process, for tests that run it inside a test-bed host (a network
// namespace): the job folder, data and page come from the test; it listens on every address
// of its host with the coordinator's own STUN, and with `turn` a real coturn beside it. It
// prints one JSON line per live event on stdout (`{"event": ...}`), first `{"ready": {...}}`,
// and closes everything on SIGTERM.
//
//   node --import tsx --import ./scripts/raw-loader.mjs testbed/net/coordinator-proc.ts '<json>'
//   json: { jobDir, dataDir, dataset, config, port, turn?: { port, relayPorts }, pageDir?, tlsDir?, timeouts? }
import { readComplete } from '../../coordinator/data/cli.ts';
import { runJob } from '../../coordinator/run.ts';
import { startTurnRelay } from '../../coordinator/turn.ts';
import type { CoordinatorProcOptions } from './scenario.ts';


const o = JSON.parse(process.argv[2] ?? '{}') as CoordinatorProcOptions;
const say = (x: unknown) => process.stdout.write(`${JSON.stringify(x)}\n`);
const manifest = await readComplete(`${o.dataDir}/${o.dataset}`);
if (!manifest) throw new Error(`no complete data set in ${o.dataDir}/${o.dataset}`);
const relay = o.turn ? await startTurnRelay({ port: o.turn.port, relayPorts: o.turn.relayPorts, log: (l) => process.stderr.write(`${l}\n`) }) : null;
const job = await runJob({
  jobDir: o.jobDir, config: o.config, dataDir: o.dataDir, manifest, host: '0.0.0.0', port: o.port, evalSamples: o.evalSamples ?? 48,
  ...(o.finalEvalSamples ? { finalEvalSamples: o.finalEvalSamples } : {}),
  heartbeatMs: o.heartbeatMs ?? 1000, timeouts: o.timeouts, pageDir: o.pageDir,
  ice: { turn: relay ? { port: relay.port, secret: relay.secret } : undefined },
  tls: o.tlsDir ? { dir: o.tlsDir } : { mode: 'off' },
  onEvent: (e) => say({ event: e }),
  log: (l) => process.stderr.write(`${l}\n`),
});
say({ ready: { url: job.url, port: job.coordinator.port } });
let closing = false;
const close = async () => {
  if (closing) return;
  closing = true;
  await job.close();
  await relay?.close();
  process.exit(0);
};
process.on('SIGTERM', () => void close());
process.on('SIGINT', () => void close());
await job.driver.finished;
say({ finished: job.driver.status() });
