// Runs an op suite under vitest in Node on every backend (VT_OP_BACKENDS=webgpu,wasm
// restricts them; default both): one describe block per backend, one engine per block.
// 'webgpu' is the real 'webgpu' package (Dawn); no adapter is a failure, never a skip.
// GPU-only cases are reported as skipped (with their [GPU-only] tag) on other backends.
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { AnyEngine } from '../../src/backend/engine.ts';
import { createEngine } from './engines.ts';
import { caseTitle, parseBackends, runCase, runsOn, type OpSuite } from './suite.ts';

export function describeSuite(suite: OpSuite): void {
  for (const backend of parseBackends(process.env.VT_OP_BACKENDS)) {
    describe(`${suite.op} (${backend} vs float64 reference, Node)`, () => {
      let engine: AnyEngine | undefined;
      beforeAll(async () => {
        engine = await createEngine(backend);
      });
      afterAll(() => engine?.destroy());
      for (const c of suite.cases) {
        if (!runsOn(c, backend)) {
          it.skip(caseTitle(c), () => {});
          continue;
        }
        it(caseTitle(c), async () => {
          if (!engine) throw new Error(`no ${backend} engine`);
          await runCase(c, engine);
        });
      }
    });
  }
}
