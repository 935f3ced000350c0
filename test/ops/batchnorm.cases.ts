import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import { batchNormDims } from '../../src/ops/batchnorm.ts';
import * as ref from '../../src/ref/batchnorm.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import { assertClose, FWD, GRAD, type Tolerance } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

const P = { eps: 1e-5, momentum: 0.1 };
const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);

/** f32 sums of m terms: allow rounding that grows with the square root of the length. */
const sumTol = (base: Tolerance, m: number): Tolerance => ({ rtol: base.rtol, atol: base.atol * Math.max(1, Math.sqrt(m) / 16) });

/**
 * Training forward + backward (+ inference) against the reference. dgamma and dbeta are views
 * of one flat gradient buffer, as a model lays them out, pre-filled so accumulate shows.
 */
async function check<T extends TensorLike>(e: Engine<T>, shape: number[], accumulate: boolean): Promise<void> {
  const { n, c, hw } = batchNormDims(shape);
  const size = n * c * hw, m = n * hw;
  const rng = makeRng(size + 7 * c);
  const x = uniformF32(rng, size, -1, 3), dy = uniformF32(rng, size);
  const gamma = uniformF32(rng, c, 0.5, 1.5), beta = uniformF32(rng, c), rm = uniformF32(rng, c), rv = uniformF32(rng, c, 0.5, 2);
  const g0 = uniformF32(rng, 2 * c);
  const stride = Math.ceil(c / e.viewAlign) * e.viewAlign; // aligned views, as in a model's layout
  const grads = e.zeros([2 * stride]);
  const tdg = e.view(grads, 0, [c]), tdb = e.view(grads, stride, [c]);
  e.write(grads, g0.subarray(0, c), 0);
  e.write(grads, g0.subarray(c), stride);
  const tx = e.upload(x, shape), tdy = e.upload(dy, shape), tg = e.upload(gamma), tb = e.upload(beta);
  const trm = e.upload(rm), trv = e.upload(rv);
  const ty = e.empty(shape), tdx = e.empty(shape), tmean = e.empty([c]), tinv = e.empty([c]), tyi = e.empty(shape);
  e.batchNormForward(tx, tg, tb, trm, trv, ty, tmean, tinv, P);
  e.batchNormBackward(tx, tdy, tg, tmean, tinv, tdx, tdg, tdb, { accumulate });
  e.batchNormInference(tx, tg, tb, trm, trv, tyi, P);

  const want = ref.batchNormForward(f64(x), shape, f64(gamma), f64(beta), f64(rm), f64(rv), P);
  const read = (t: T): Promise<Float32Array> => e.readF32(t);
  assertClose(await read(tmean), want.mean, FWD, 'bn mean');
  assertClose(await read(tinv), want.invstd, FWD, 'bn invstd');
  assertClose(await read(ty), want.y, FWD, 'bn y');
  assertClose(await read(trm), want.runningMean, FWD, 'bn running mean');
  assertClose(await read(trv), want.runningVar, FWD, 'bn running var');
  const yi = ref.batchNormInference(f64(x), shape, f64(gamma), f64(beta), want.runningMean, want.runningVar, P.eps);
  assertClose(await read(tyi), yi, FWD, 'bn inference y');
  const g = ref.batchNormBackward(f64(x), f64(dy), shape, f64(gamma), want.mean, want.invstd);
  const plus = (a: Float64Array, off: number): Float64Array => (accumulate ? a.map((v, i) => v + g0[off + i]!) : a);
  assertClose(await read(tdx), g.dx, GRAD, 'bn dx');
  assertClose(await read(tdg), plus(g.dgamma, 0), sumTol(GRAD, m), 'bn dgamma');
  assertClose(await read(tdb), plus(g.dbeta, c), sumTol(GRAD, m), 'bn dbeta');
  e.release(grads, tx, tdy, tg, tb, trm, trv, ty, tdx, tmean, tinv, tyi);
}

const shapes: [string, number[]][] = [
  ['N*H*W = 1 (variance 0, finite by eps) [1, 3, 1, 1]', [1, 3, 1, 1]],
  ['batch 1, odd [1, 3, 5, 7]', [1, 3, 5, 7]],
  ['C=5 (not a multiple of 4) [2, 5, 3, 3]', [2, 5, 3, 3]],
  ['features [4, 10] (BN after a linear layer)', [4, 10]],
  ['features [3, 1000]', [3, 1000]],
  ['ResNet BN [1, 64, 56, 56]', [1, 64, 56, 56]],
  ['ResNet layer4 BN [2, 512, 7, 7]', [2, 512, 7, 7]],
];

/** Forward + backward twice on the same inputs: every output must repeat bit for bit. */
async function repeatable<T extends TensorLike>(e: Engine<T>, shape: number[]): Promise<void> {
  const { c } = batchNormDims(shape);
  const size = shape.reduce((a, b) => a * b, 1);
  const rng = makeRng(size);
  const tx = e.upload(uniformF32(rng, size), shape), tdy = e.upload(uniformF32(rng, size), shape);
  const tg = e.upload(uniformF32(rng, c)), tb = e.upload(uniformF32(rng, c));
  const runOnce = async (): Promise<Uint32Array[]> => {
    const trm = e.zeros([c]), trv = e.zeros([c]), ty = e.empty(shape), tdx = e.empty(shape);
    const tmean = e.empty([c]), tinv = e.empty([c]), tdg = e.empty([c]), tdb = e.empty([c]);
    e.batchNormForward(tx, tg, tb, trm, trv, ty, tmean, tinv, P);
    e.batchNormBackward(tx, tdy, tg, tmean, tinv, tdx, tdg, tdb, { accumulate: false });
    const all = [ty, tmean, tinv, trm, trv, tdx, tdg, tdb];
    const bits = await Promise.all(all.map(async (t) => new Uint32Array((await e.readF32(t)).buffer)));
    e.release(...all);
    return bits;
  };
  const [a, b] = [await runOnce(), await runOnce()];
  a.forEach((v, k) => {
    const i = v.findIndex((bitsA, j) => bitsA !== b[k]![j]);
    if (i >= 0) throw new Error(`batchnorm output ${k} differs between two identical runs at [${i}]`);
  });
  e.release(tx, tdy, tg, tb);
}

const cases: OpCase[] = [
  { name: 'bitwise repeatable [2, 24, 17, 17]', run: (e) => repeatable(e, [2, 24, 17, 17]) },
  ...shapes.map(([name, shape], i): OpCase => ({ name: `${name}${i % 2 ? ', accumulate' : ''}`, run: (e) => check(e, shape, i % 2 === 1) })),
  // 315 floats per sample, 512-float bindings: one sample per slice, unaligned slice starts.
  { name: 'split into 2 KiB bindings [3, 5, 7, 9]', gpuOnly: true, run: (e) => withBindingLimit(e.gpu, 2048, () => check(e, [3, 5, 7, 9], false)) },
  { name: 'split, accumulate [3, 5, 7, 9]', gpuOnly: true, run: (e) => withBindingLimit(e.gpu, 2048, () => check(e, [3, 5, 7, 9], true)) },
];

export const suite: OpSuite = { op: 'batchnorm', cases };
