// Starts the op-suite worker and exposes its results to the test driver as window.opsResults.
// Query: ?only=op1,op2 (suites) and ?backends=webgpu,wasm (default: every backend).
import { parseBackends } from '../ops/suite.ts';
import type { OpsResults, StartMsg, WorkerMsg } from './ops-protocol.ts';

const state: OpsResults = { engines: [], engineErrors: [], results: [], times: {}, done: false };
(window as unknown as { opsResults: OpsResults }).opsResults = state;

const log = document.getElementById('log')!;
const say = (line: string): void => void (log.textContent += `\n${line}`);
try {
  const q = new URLSearchParams(location.search);
  const start: StartMsg = {
    type: 'start',
    only: (q.get('only') ?? '').split(',').filter((s) => s.length > 0),
    backends: parseBackends(q.get('backends')),
  };
  const worker = new Worker(new URL('./ops-worker.ts', import.meta.url), { type: 'module' });
  worker.onmessage = (ev: MessageEvent<WorkerMsg>) => {
    const m = ev.data;
    switch (m.type) {
      case 'engine': state.engines.push(m.engine); say(`engine ${m.engine.backend}: ${m.engine.description}`); break;
      case 'engine-failed': state.engineErrors.push({ backend: m.backend, error: m.error }); say(`ENGINE ${m.backend} FAILED: ${m.error}`); break;
      case 'result': {
        const r = m.result;
        state.results.push(r);
        say(`${r.skipped ? 'skip' : r.ok ? 'ok  ' : 'FAIL'} [${r.backend}] ${r.op}: ${r.name}`);
        break;
      }
      case 'backend-done': state.times[m.backend] = m.ms; say(`${m.backend} done in ${(m.ms / 1000).toFixed(1)} s`); break;
      case 'done': state.done = true; state.total = m.total; break;
      case 'fatal': state.fatal = m.error; state.done = true; say(`FATAL ${m.error}`); break;
    }
  };
  worker.onerror = (e) => { state.fatal = `worker error: ${e.message}`; state.done = true; };
  worker.postMessage(start);
} catch (e) {
  state.fatal = String(e);
  state.done = true;
}
