import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import * as ref from '../../src/ref/relu.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import type { OpSuite } from './suite.ts';

const sizes = [1, 7, 256, 257, 4099];

async function check<T extends TensorLike>(e: Engine<T>, n: number): Promise<void> {
  const rng = makeRng(n);
  const x = uniformF32(rng, n);
  const dy = uniformF32(rng, n);
  const tx = e.upload(x), tdy = e.upload(dy);
  const ty = e.empty([n]), tdx = e.empty([n]);
  e.reluForward(tx, ty);
  e.reluBackward(tx, tdy, tdx);
  assertClose(await e.readF32(ty), ref.reluForward(Float64Array.from(x)), FWD, 'relu y');
  assertClose(await e.readF32(tdx), ref.reluBackward(Float64Array.from(x), Float64Array.from(dy)), GRAD, 'relu dx');
  e.release(tx, tdy, ty, tdx);
}

export const suite: OpSuite = {
  op: 'relu',
  cases: sizes.map((n) => ({ name: `n=${n} forward and backward`, run: (e) => check(e, n) })),
};
