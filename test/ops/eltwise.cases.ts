import { add, addInPlace, axpy, fill, scale, scaleInPlace } from '../../src/ops/eltwise.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import * as ref from '../../src/ref/eltwise.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD } from '../helpers/compare.ts';
import type { OpSuite } from './suite.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';


const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);

async function allOps(gpu: Gpu, n: number, ranges = 1): Promise<void> {
  const rng = makeRng(n);
  const x = uniformF32(rng, n), y = uniformF32(rng, n), a = -1.3;
  const tx = gpu.upload(x), ty = gpu.upload(y), tz = gpu.empty([n]), acc = gpu.upload(y), ts = gpu.upload(x), tf = gpu.empty([n]);
  const before = gpu.dispatchCount;
  add(gpu, tx, ty, tz);
  if (gpu.dispatchCount - before !== ranges) throw new Error(`add used ${gpu.dispatchCount - before} dispatches, expected ${ranges} binding ranges`);
  assertClose(await gpu.readF32(tz), ref.add(f64(x), f64(y)), FWD, 'add');
  addInPlace(gpu, acc, tx);
  assertClose(await gpu.readF32(acc), ref.add(f64(y), f64(x)), FWD, 'addInPlace');
  scale(gpu, tx, a, tz);
  assertClose(await gpu.readF32(tz), ref.scale(f64(x), a), FWD, 'scale');
  scaleInPlace(gpu, ts, a);
  assertClose(await gpu.readF32(ts), ref.scale(f64(x), a), FWD, 'scaleInPlace');
  axpy(gpu, a, tx, ty);
  assertClose(await gpu.readF32(ty), ref.axpy(a, f64(x), f64(y)), FWD, 'axpy');
  fill(gpu, tf, 0.25);
  assertClose(await gpu.readF32(tf), ref.fill(n, 0.25), FWD, 'fill');
  gpu.release(tx, ty, tz, acc, ts, tf);
}

export const suite: OpSuite = {
  op: 'eltwise',
  cases: [
    ...[1, 7, 256, 257, 4099].map((n) => ({ name: `n=${n} add, addInPlace, scale, scaleInPlace, axpy, fill`, run: (gpu: Gpu) => allOps(gpu, n) })),
    // 3000 floats in bindings of 1024: three ranges, the last one partial.
    { name: 'n=3000 split into 4 KiB bindings', run: (gpu: Gpu) => withBindingLimit(gpu, 4096, () => allOps(gpu, 3000, 3)) },
  ],
};
