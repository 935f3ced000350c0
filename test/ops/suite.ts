// An op suite is a data table of cases, each of which runs ops on a compute Engine
// (src/backend/engine.ts) and compares them with the float64 reference (throwing with the
// comparator's message on mismatch). The same suites run on every backend ('webgpu' and
// 'wasm'), under vitest in Node (node-runner.ts) and in headless Chromium in a Web Worker
// (test/browser/ops-worker.ts), so every case is checked on both backends in both places.
//
// A case that tests something only the WebGPU backend has (binding-size splitting, kernel
// variants and tuning constants, dispatch counts, GPU-only ops such as the optimizer's
// kernels or the segment reductions) is marked `gpuOnly`: its run gets the WebGpuEngine
// (whose `.gpu` is the Gpu). Runners report such cases as skipped on other backends, with
// GPU_ONLY_TAG in the name, never leave them out.
import { WebGpuEngine } from '../../src/backend/webgpu.ts';
import type { BackendKind, Engine, TensorLike } from '../../src/backend/engine.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';

/** A case every engine runs. */
export interface EngineCase {
  name: string;
  gpuOnly?: false;
  run<T extends TensorLike>(e: Engine<T>): Promise<void>;
}

/** A case only the WebGPU engine runs (it needs the Gpu itself). */
export interface GpuOnlyCase {
  name: string;
  gpuOnly: true;
  run(e: WebGpuEngine): Promise<void>;
}

export type OpCase = EngineCase | GpuOnlyCase;

/** A case written against the Gpu itself (src/ops and src/optim on a Gpu, no Engine). */
export interface GpuCase {
  name: string;
  run(gpu: Gpu): Promise<void>;
}

/** GPU-only cases from cases written against the Gpu: each runs on the WebGpuEngine's Gpu. */
export function gpuOnly(cases: readonly GpuCase[]): GpuOnlyCase[] {
  return cases.map((c): GpuOnlyCase => ({ name: c.name, gpuOnly: true, run: (e) => c.run(e.gpu) }));
}

export interface OpSuite {
  op: string;
  cases: OpCase[];
}

export const BACKENDS: readonly BackendKind[] = ['webgpu', 'wasm'];
export const GPU_ONLY_TAG = '[GPU-only]';

/** The name runners report a case under (GPU-only cases carry GPU_ONLY_TAG). */
export function caseTitle(c: OpCase): string {
  return c.gpuOnly ? `${c.name} ${GPU_ONLY_TAG}` : c.name;
}

/** Whether a backend runs the case (GPU-only cases run on 'webgpu' only). */
export function runsOn(c: OpCase, backend: BackendKind): boolean {
  return !c.gpuOnly || backend === 'webgpu';
}

/**
 * Which backends to run: a comma-separated list (VT_OP_BACKENDS in Node, ?backends= in the
 * browser); empty or missing means all. Unknown names are an error, not silently ignored.
 */
export function parseBackends(list: string | null | undefined): BackendKind[] {
  if (!list || !list.trim()) return [...BACKENDS];
  const names = list.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  const bad = names.filter((s) => !(BACKENDS as readonly string[]).includes(s));
  if (bad.length) throw new Error(`unknown op backend(s) ${bad.join(', ')}: expected a comma-separated subset of ${BACKENDS.join(', ')}`);
  return BACKENDS.filter((b) => names.includes(b));
}

/**
 * Runs one case on an engine of the backend it is meant for, then (on WebGPU) throws any
 * validation error or device loss the case caused.
 */
export async function runCase<T extends TensorLike>(c: OpCase, e: Engine<T>): Promise<void> {
  if (c.gpuOnly) {
    if (!(e instanceof WebGpuEngine)) throw new Error(`'${c.name}' is GPU-only: it cannot run on the ${e.info.backend} engine`);
    await c.run(e);
  } else {
    await c.run(e);
  }
  if (e instanceof WebGpuEngine) e.gpu.checkErrors();
}

/** All suites: every file test/ops/*.cases.ts exporting `suite`. Works in vitest and vite. */
export function allSuites(): OpSuite[] {
  const mods = import.meta.glob<{ suite: OpSuite }>('./*.cases.ts', { eager: true });
  return Object.keys(mods)
    .sort()
    .map((k) => mods[k]!.suite);
}
