// Page of test/wasm/threads.html: checks that a threaded engine is refused on the main thread
// (no Atomics.wait there), then runs threads-worker.ts and exposes window.threadsResult.
import { WasmEngine } from '../../src/wasm/engine.ts';
import type { ThreadsResult, WorkerReport } from './threads-protocol.ts';

const state: ThreadsResult = { pageIsolated: crossOriginIsolated, mainThreadError: '', done: false };
(window as unknown as { threadsResult: ThreadsResult }).threadsResult = state;

WasmEngine.create({ threads: 2 }).then(
  (e) => { e.destroy(); state.mainThreadError = '(no error: created on the main thread)'; },
  (e: unknown) => { state.mainThreadError = e instanceof Error ? e.message : String(e); },
).finally(() => {
  const worker = new Worker(new URL('./threads-worker.ts', import.meta.url), { type: 'module' });
  worker.onmessage = (ev: MessageEvent<{ report?: WorkerReport; error?: string }>) => {
    state.worker = ev.data.report;
    state.error = ev.data.error;
    state.done = true;
  };
  worker.onerror = (e) => { state.error = `worker error: ${e.message}`; state.done = true; };
});
