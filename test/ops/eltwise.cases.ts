import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { add, axpy, scale, scaleInPlace } from '../../src/ops/eltwise.ts';
import * as ref from '../../src/ref/eltwise.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, FWD } from '../helpers/compare.ts';
import type { OpSuite } from './suite.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';

const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);
const SIZES = [1, 7, 256, 257, 4099];

function data(n: number): { x: Float32Array; y: Float32Array; a: number } {
  const rng = makeRng(n);
  return { x: uniformF32(rng, n), y: uniformF32(rng, n), a: -1.3 };
}

/** The Engine's elementwise ops. */
async function engineOps<T extends TensorLike>(e: Engine<T>, n: number): Promise<void> {
  const { x, y } = data(n);
  const tx = e.upload(x), ty = e.upload(y), tz = e.empty([n]), acc = e.upload(y), tf = e.empty([n]);
  e.add(tx, ty, tz);
  assertClose(await e.readF32(tz), ref.add(f64(x), f64(y)), FWD, 'add');
  e.addInPlace(acc, tx);
  assertClose(await e.readF32(acc), ref.add(f64(y), f64(x)), FWD, 'addInPlace');
  e.fill(tf, 0.25);
  assertClose(await e.readF32(tf), ref.fill(n, 0.25), FWD, 'fill');
  // readF32Into: a view's elements land at the offset, bit for bit readF32's; nothing else is touched.
  const from = Math.floor(n / 3 / e.viewAlign) * e.viewAlign, len = n - from, at = 5; // a view starts on the engine's alignment
  const into = new Float32Array(at + len + 3).fill(-7);
  await e.readF32Into(e.view(tz, from, [len]), into, at);
  const want = (await e.readF32(tz)).subarray(from);
  if (!into.subarray(at, at + len).every((v, i) => Object.is(v, want[i])) || !into.subarray(0, at).every((v) => v === -7)
    || !into.subarray(at + len).every((v) => v === -7)) throw new Error(`readF32Into of ${len} floats at ${at} is not readF32's`);
  e.release(tx, ty, tz, acc, tf);
}

/**
 * What only src/ops/eltwise.ts has: scale, scaleInPlace and axpy (not Engine ops), and add
 * using one dispatch per binding range.
 */
async function gpuOps(gpu: Gpu, n: number, ranges = 1): Promise<void> {
  const { x, y, a } = data(n);
  const tx = gpu.upload(x), ty = gpu.upload(y), tz = gpu.empty([n]), ts = gpu.upload(x);
  const before = gpu.dispatchCount;
  add(gpu, tx, ty, tz);
  if (gpu.dispatchCount - before !== ranges) throw new Error(`add used ${gpu.dispatchCount - before} dispatches, expected ${ranges} binding ranges`);
  assertClose(await gpu.readF32(tz), ref.add(f64(x), f64(y)), FWD, 'add');
  scale(gpu, tx, a, tz);
  assertClose(await gpu.readF32(tz), ref.scale(f64(x), a), FWD, 'scale');
  scaleInPlace(gpu, ts, a);
  assertClose(await gpu.readF32(ts), ref.scale(f64(x), a), FWD, 'scaleInPlace');
  axpy(gpu, a, tx, ty);
  assertClose(await gpu.readF32(ty), ref.axpy(a, f64(x), f64(y)), FWD, 'axpy');
  gpu.release(tx, ty, tz, ts);
}

export const suite: OpSuite = {
  op: 'eltwise',
  cases: [
    ...SIZES.map((n) => ({ name: `n=${n} add, addInPlace, fill`, run: <T extends TensorLike>(e: Engine<T>) => engineOps(e, n) })),
    {
      name: `scale, scaleInPlace, axpy (not Engine ops) and add in one dispatch, n = ${SIZES.join(', ')}`,
      gpuOnly: true,
      async run(e) {
        for (const n of SIZES) await gpuOps(e.gpu, n);
      },
    },
    // 3000 floats in bindings of 1024: three ranges, the last one partial.
    {
      name: 'n=3000 split into 4 KiB bindings',
      gpuOnly: true,
      run: (e) => withBindingLimit(e.gpu, 4096, async () => { await engineOps(e, 3000); await gpuOps(e.gpu, 3000, 3); }),
    },
  ],
};
