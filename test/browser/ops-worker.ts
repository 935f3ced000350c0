// Dedicated Worker: loads each engine the way the app does (WebGPU through the same
// getDevice() the volunteer uses, WasmEngine.create() for WebAssembly) and runs every op
// suite (test/ops/*.cases.ts) on each, posting one result per case and backend. GPU-only
// cases are posted as skipped on the other backends.
import type { AnyEngine } from '../../src/backend/engine.ts';
import { createEngine } from '../ops/engines.ts';
import { allSuites, caseTitle, parseBackends, runCase, runsOn } from '../ops/suite.ts';
import type { StartMsg, WorkerMsg } from './ops-protocol.ts';

const post = (m: WorkerMsg): void => (self as unknown as Worker).postMessage(m);
const errText = (e: unknown): string => (e instanceof Error ? (e.stack ?? e.message) : String(e));

async function main(start: StartMsg): Promise<void> {
  const suites = allSuites().filter((s) => start.only.length === 0 || start.only.includes(s.op));
  const backends = parseBackends(start.backends.join(','));
  let total = 0;
  for (const backend of backends) {
    const t0 = performance.now();
    let engine: AnyEngine;
    try {
      engine = await createEngine(backend);
    } catch (e) {
      post({ type: 'engine-failed', backend, error: errText(e) });
      continue;
    }
    const { info } = engine;
    post({ type: 'engine', engine: { backend, reported: info.backend, platform: info.platform, description: info.description, cpu: info.cpu } });
    try {
      for (const suite of suites) {
        for (const c of suite.cases) {
          total++;
          const name = caseTitle(c);
          if (!runsOn(c, backend)) {
            post({ type: 'result', result: { backend, op: suite.op, name, ok: true, skipped: 'gpu-only', ms: 0 } });
            continue;
          }
          const t = performance.now();
          try {
            await runCase(c, engine);
            post({ type: 'result', result: { backend, op: suite.op, name, ok: true, ms: performance.now() - t } });
          } catch (e) {
            post({ type: 'result', result: { backend, op: suite.op, name, ok: false, error: errText(e), ms: performance.now() - t } });
          }
        }
      }
    } finally {
      engine.destroy();
    }
    post({ type: 'backend-done', backend, ms: performance.now() - t0 });
  }
  post({ type: 'done', total });
}

self.onmessage = (ev: MessageEvent<StartMsg>) => {
  if (ev.data.type !== 'start') return;
  main(ev.data).catch((e: unknown) => post({ type: 'fatal', error: errText(e) }));
};
