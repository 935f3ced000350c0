import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { biasDims, biasForward } from '../../src/ops/bias.ts';
import * as ref from '../../src/ref/bias.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import type { OpCase, OpSuite } from './suite.ts';

/** The case's random data (the same for the engine check and the GPU-only biasForward check). */
function data(shape: number[]): { x: Float32Array; b: Float32Array; dy: Float32Array; db0: Float32Array; n: number; c: number; hw: number } {
  const { n, c, hw } = biasDims(shape);
  const size = n * c * hw;
  const rng = makeRng(size + c);
  const x = uniformF32(rng, size), b = uniformF32(rng, c), dy = uniformF32(rng, size), db0 = uniformF32(rng, c);
  return { x, b, dy, db0, n, c, hw };
}

/** The Engine's bias ops: dy += b in place, then the backward of that (the sums shift by n*hw*b[c]). */
async function check<T extends TensorLike>(e: Engine<T>, shape: number[], accumulate: boolean): Promise<void> {
  const { b, dy, db0, n, hw } = data(shape);
  const tb = e.upload(b), tdy = e.upload(dy, shape), tdb = e.upload(db0);
  e.biasAddInPlace(tdy, tb);
  e.biasBackward(tdy, tdb, { accumulate });
  const dyb = ref.biasForward(Float64Array.from(dy), Float64Array.from(b), shape);
  assertClose(await e.readF32(tdy), dyb, FWD, 'bias in place');
  const [, db] = ref.biasBackward(dyb, shape);
  if (accumulate) db.forEach((v, i) => (db[i] = v + db0[i]!));
  // f32 sums of n*hw terms: allow rounding that grows with the square root of the length.
  const tol = { rtol: GRAD.rtol, atol: GRAD.atol * Math.max(1, Math.sqrt(n * hw) / 16) };
  assertClose(await e.readF32(tdb), db, tol, 'bias db');
  e.release(tb, tdy, tdb);
}

/** y = x + b out of place: src/ops' biasForward, which is not an Engine op (models add in place). */
async function checkForward(gpu: Gpu, shape: number[]): Promise<void> {
  const { x, b } = data(shape);
  const tx = gpu.upload(x, shape), tb = gpu.upload(b), ty = gpu.empty(shape);
  biasForward(gpu, tx, tb, ty);
  assertClose(await gpu.readF32(ty), ref.biasForward(Float64Array.from(x), Float64Array.from(b), shape), FWD, 'bias y');
  gpu.release(tx, tb, ty);
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

const cases: OpCase[] = [
  ...shapes.map(([name, shape], i): OpCase => ({ name: `${name}${i % 2 ? ', db accumulate' : ''}`, run: (e) => check(e, shape, i % 2 === 1) })),
  {
    name: 'out-of-place biasForward (not an Engine op) on every shape above',
    gpuOnly: true,
    async run(e) {
      for (const [, shape] of shapes) await checkForward(e.gpu, shape);
    },
  },
  // 945 floats per sample, bindings of 1024 floats: three batch slices (unaligned starts),
  // three forward ranges whose channel index continues across the range boundary.
  {
    name: 'split into 4 KiB bindings [3, 5, 7, 27]',
    gpuOnly: true,
    run: (e) => withBindingLimit(e.gpu, 4096, async () => { await checkForward(e.gpu, [3, 5, 7, 27]); await check(e, [3, 5, 7, 27], false); }),
  },
  {
    name: 'split, accumulate [3, 5, 7, 27]',
    gpuOnly: true,
    run: (e) => withBindingLimit(e.gpu, 4096, async () => { await checkForward(e.gpu, [3, 5, 7, 27]); await check(e, [3, 5, 7, 27], true); }),
  },
];

export const suite: OpSuite = { op: 'bias', cases };
