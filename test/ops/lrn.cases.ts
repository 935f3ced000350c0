import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import { ALEXNET_LRN, type LrnParams } from '../../src/ops/lrn.ts';
import * as ref from '../../src/ref/lrn.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

/** Strong normalisation, so the cross-channel gradient terms are as large as the direct ones. */
const STRONG: LrnParams = { size: 5, alpha: 1, beta: 0.75, k: 1 };

/** `scale`: input magnitude (AlexNet's post-ReLU activations reach tens). */
async function check<T extends TensorLike>(e: Engine<T>, shape: number[], p: LrnParams, scale = 1): Promise<void> {
  const size = shape.reduce((a, b) => a * b, 1);
  const rng = makeRng(size + p.size);
  const x = uniformF32(rng, size, -scale, scale), dy = uniformF32(rng, size);
  const tx = e.upload(x, shape), tdy = e.upload(dy, shape), ty = e.empty(shape), tdx = e.empty(shape);
  e.lrnForward(tx, ty, p);
  e.lrnBackward(tx, ty, tdy, tdx, p);
  const xd = Float64Array.from(x);
  assertClose(await e.readF32(ty), ref.lrnForward(xd, shape, p), FWD, 'lrn y');
  assertClose(await e.readF32(tdx), ref.lrnBackward(xd, Float64Array.from(dy), shape, p), GRAD, 'lrn dx');
  e.release(tx, tdy, ty, tdx);
}

const cases: [string, () => [number[], LrnParams, number?]][] = [
  ['C=7, batch 1, odd [1, 7, 5, 3]', () => [[1, 7, 5, 3], STRONG]],
  ['C=3 < size 5 [2, 3, 4, 4]', () => [[2, 3, 4, 4], STRONG]],
  ['C=1 [2, 1, 3, 3]', () => [[2, 1, 3, 3], STRONG]],
  ['1x1 planes, C=10 [3, 10, 1, 1]', () => [[3, 10, 1, 1], STRONG]],
  ['even size 4 [2, 6, 3, 5]', () => [[2, 6, 3, 5], { size: 4, alpha: 0.5, beta: 0.6, k: 1.5 }]],
  ['AlexNet setting, C=13, activations to 30 [2, 13, 5, 5]', () => [[2, 13, 5, 5], ALEXNET_LRN, 30]],
  ['AlexNet LRN1 [1, 96, 55, 55]', () => [[1, 96, 55, 55], ALEXNET_LRN, 30]],
  ['AlexNet LRN2 [1, 256, 27, 27]', () => [[1, 256, 27, 27], ALEXNET_LRN, 30]],
];

export const suite: OpSuite = {
  op: 'lrn',
  cases: [
    ...cases.map(([name, args]): OpCase => ({ name, run: (e) => check(e, ...args()) })),
    // 315 floats per sample, 512-float bindings: one sample per slice, unaligned slice starts.
    { name: 'split into 2 KiB bindings [3, 5, 7, 9]', gpuOnly: true, run: (e) => withBindingLimit(e.gpu, 2048, () => check(e, [3, 5, 7, 9], STRONG)) },
  ],
};
