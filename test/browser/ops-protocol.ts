// Messages between the op-suite page and its worker.
import type { BackendKind } from '../../src/backend/engine.ts';

/** Page -> worker: which suites (ops) and backends to run; empty lists mean all. */
export interface StartMsg { type: 'start'; only: string[]; backends: BackendKind[] }

/**
 * One case on one backend. `skipped: 'gpu-only'`: a GPU-only case on a backend other than
 * WebGPU (reported, never left out); `ok` is then true.
 */
export interface CaseResult { backend: BackendKind; op: string; name: string; ok: boolean; skipped?: 'gpu-only'; error?: string; ms: number }

/** What an engine says about itself once it is loaded in the worker. */
export interface EngineLoaded { backend: BackendKind; reported: BackendKind; platform: 'node' | 'browser'; description: string; cpu: boolean }

export type WorkerMsg =
  | { type: 'engine'; engine: EngineLoaded }
  | { type: 'engine-failed'; backend: BackendKind; error: string }
  | { type: 'result'; result: CaseResult }
  | { type: 'backend-done'; backend: BackendKind; ms: number }
  | { type: 'done'; total: number }
  | { type: 'fatal'; error: string };

/** What the page exposes to the test driver as window.opsResults. */
export interface OpsResults {
  engines: EngineLoaded[];
  engineErrors: { backend: BackendKind; error: string }[];
  results: CaseResult[];
  /** Wall time per backend, ms. */
  times: Partial<Record<BackendKind, number>>;
  done: boolean;
  fatal?: string;
  total?: number;
}
