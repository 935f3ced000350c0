// Starts the op-suite worker and exposes its results to the test driver as window.opsResults.
import type { CaseResult, WorkerMsg } from './ops-protocol.ts';

interface OpsResults { device?: string; software?: boolean; results: CaseResult[]; done: boolean; fatal?: string; total?: number }
const state: OpsResults = { results: [], done: false };
(window as unknown as { opsResults: OpsResults }).opsResults = state;

const only = new URLSearchParams(location.search).get('only');
const worker = new Worker(new URL(`./ops-worker.ts${only ? `?only=${only}` : ''}`, import.meta.url), { type: 'module' });
const log = document.getElementById('log')!;
worker.onmessage = (ev: MessageEvent<WorkerMsg>) => {
  const m = ev.data;
  if (m.type === 'device') { state.device = m.description; state.software = m.software; }
  else if (m.type === 'result') { state.results.push(m.result); log.textContent += `\n${m.result.ok ? 'ok  ' : 'FAIL'} ${m.result.op}: ${m.result.name}`; }
  else if (m.type === 'done') { state.done = true; state.total = m.total; }
  else { state.fatal = m.error; state.done = true; log.textContent += `\nFATAL ${m.error}`; }
};
worker.onerror = (e) => { state.fatal = `worker error: ${e.message}`; state.done = true; };
