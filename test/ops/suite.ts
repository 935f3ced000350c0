// An op suite is a data table of cases, each of which runs a GPU op and compares it with the
// float64 reference (throwing with the comparator's message on mismatch). The same suites run
// under vitest in Node (node-runner.ts) and in headless Chromium in a Web Worker
// (test/browser/ops-worker.ts), so every case is checked on both.
import type { Gpu } from '../../src/gpu/runtime.ts';

export interface OpCase {
  name: string;
  run(gpu: Gpu): Promise<void>;
}

export interface OpSuite {
  op: string;
  cases: OpCase[];
}

/** All suites: every file test/ops/*.cases.ts exporting `suite`. Works in vitest and vite. */
export function allSuites(): OpSuite[] {
  const mods = import.meta.glob<{ suite: OpSuite }>('./*.cases.ts', { eager: true });
  return Object.keys(mods)
    .sort()
    .map((k) => mods[k]!.suite);
}
