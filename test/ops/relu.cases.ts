import { reluBackward, reluForward } from '../../src/ops/relu.ts';
import * as ref from '../../src/ref/relu.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import type { OpSuite } from './suite.ts';

const sizes = [1, 7, 256, 257, 4099];

export const suite: OpSuite = {
  op: 'relu',
  cases: sizes.map((n) => ({
    name: `n=${n} forward and backward`,
    async run(gpu) {
      const rng = makeRng(n);
      const x = uniformF32(rng, n);
      const dy = uniformF32(rng, n);
      const tx = gpu.upload(x), tdy = gpu.upload(dy);
      const ty = gpu.empty([n]), tdx = gpu.empty([n]);
      reluForward(gpu, tx, ty);
      reluBackward(gpu, tx, tdy, tdx);
      assertClose(await gpu.readF32(ty), ref.reluForward(Float64Array.from(x)), FWD, 'relu y');
      assertClose(await gpu.readF32(tdx), ref.reluBackward(Float64Array.from(x), Float64Array.from(dy)), GRAD, 'relu dx');
      gpu.release(tx, tdy, ty, tdx);
    },
  })),
};
