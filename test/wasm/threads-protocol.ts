// Messages between test/wasm/threads-page.ts (window.threadsResult) and threads-worker.ts.
export interface WorkerReport {
  crossOriginIsolated: boolean;
  hardwareConcurrency: number;
  /** info.description of WasmEngine.create() with the default thread count. */
  description: string;
  threads: number;
  /** Per case: do the default engine's outputs equal the 1-thread engine's, bit for bit? */
  cases: { name: string; equal: boolean; elements: number }[];
}

export interface ThreadsResult {
  pageIsolated: boolean;
  /** Why WasmEngine.create({ threads: 2 }) failed on the page's main thread (it must). */
  mainThreadError: string;
  worker?: WorkerReport;
  error?: string;
  done: boolean;
}
