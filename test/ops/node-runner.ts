// Runs an op suite under vitest on the real 'webgpu' package. One device per test file.
// No adapter is a failure, never a skip.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { getDevice } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import type { OpSuite } from './suite.ts';

export function describeSuite(suite: OpSuite): void {
  describe(`${suite.op} (GPU vs float64 reference, Node)`, () => {
    let gpu: Gpu;
    beforeAll(async () => {
      gpu = await getDevice();
    });
    afterAll(() => gpu?.destroy());
    for (const c of suite.cases) {
      it(c.name, async () => {
        await c.run(gpu);
        gpu.checkErrors();
      });
    }
  });
}
