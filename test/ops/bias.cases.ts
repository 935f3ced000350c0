import { biasAddInPlace, biasBackward, biasDims, biasForward } from '../../src/ops/bias.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import * as ref from '../../src/ref/bias.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import type { OpSuite } from './suite.ts';

async function check(gpu: Gpu, shape: number[], accumulate: boolean): Promise<void> {
  const { n, c, hw } = biasDims(shape);
  const size = n * c * hw;
  const rng = makeRng(size + c);
  const x = uniformF32(rng, size), b = uniformF32(rng, c), dy = uniformF32(rng, size), db0 = uniformF32(rng, c);
  const tx = gpu.upload(x, shape), tb = gpu.upload(b), tdy = gpu.upload(dy, shape), tdb = gpu.upload(db0);
  const ty = gpu.empty(shape);
  biasForward(gpu, tx, tb, ty);
  biasAddInPlace(gpu, tdy, tb); // dy += b, then backward of that: the sums shift by n*hw*b[c]
  biasBackward(gpu, tdy, tdb, { accumulate });
  const y = ref.biasForward(Float64Array.from(x), Float64Array.from(b), shape);
  assertClose(await gpu.readF32(ty), y, FWD, 'bias y');
  const dyb = ref.biasForward(Float64Array.from(dy), Float64Array.from(b), shape);
  assertClose(await gpu.readF32(tdy), dyb, FWD, 'bias in place');
  const [, db] = ref.biasBackward(dyb, shape);
  if (accumulate) db.forEach((v, i) => (db[i] = v + db0[i]!));
  // f32 sums of n*hw terms: allow rounding that grows with the square root of the length.
  const tol = { rtol: GRAD.rtol, atol: GRAD.atol * Math.max(1, Math.sqrt(n * hw) / 16) };
  assertClose(await gpu.readF32(tdb), db, tol, 'bias db');
  gpu.release(tx, tb, tdy, tdb, ty);
}

const shapes: [string, number[]][] = [
  ['1x1x1x1', [1, 1, 1, 1]],
  ['batch 1, odd', [1, 3, 5, 7]],
  ['C=5 (not a multiple of 4), 3x3', [2, 5, 3, 3]],
  ['features [4, 10] (CIFAR head)', [4, 10]],
  ['features [3, 1000] (ImageNet head)', [3, 1000]],
  ['ResNet-50 conv1 [2, 64, 112, 112]', [2, 64, 112, 112]],
  ['ResNet-50 layer4 [2, 2048, 7, 7]', [2, 2048, 7, 7]],
];

export const suite: OpSuite = {
  op: 'bias',
  cases: [
    ...shapes.map(([name, shape], i) => ({ name: `${name}${i % 2 ? ', db accumulate' : ''}`, run: (gpu: Gpu) => check(gpu, shape, i % 2 === 1) })),
    // 945 floats per sample, bindings of 1024 floats: three batch slices (unaligned starts),
    // three forward ranges whose channel index continues across the range boundary.
    { name: 'split into 4 KiB bindings [3, 5, 7, 27]', run: (gpu: Gpu) => withBindingLimit(gpu, 4096, () => check(gpu, [3, 5, 7, 27], false)) },
    { name: 'split, accumulate [3, 5, 7, 27]', run: (gpu: Gpu) => withBindingLimit(gpu, 4096, () => check(gpu, [3, 5, 7, 27], true)) },
  ],
};
