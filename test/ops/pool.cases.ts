import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import { pool2dShape, type Pool2dParams } from '../../src/ops/pool.ts';
import * as ref from '../../src/ref/pool.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import { assertClose, FWD, GRAD } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

const size = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);

/** Random inputs; `ties` rounds x to a few levels so windows hold equal maxima. */
function data(shape: readonly number[], oshape: readonly number[], ties: boolean): { x: Float32Array; dy: Float32Array } {
  const rng = makeRng(size(shape) + size(oshape));
  const x = uniformF32(rng, size(shape));
  if (ties) x.forEach((v, i) => (x[i] = Math.round(v * 2)));
  return { x, dy: uniformF32(rng, size(oshape)) };
}

async function maxCase<T extends TensorLike>(e: Engine<T>, shape: number[], params: Pool2dParams, ties = false): Promise<void> {
  const oshape = pool2dShape(shape, params);
  const { x, dy } = data(shape, oshape, ties);
  const tx = e.upload(x, shape), tdy = e.upload(dy, oshape);
  const ty = e.empty(oshape), targ = e.empty(oshape, 'u32'), tdx = e.empty(shape);
  e.maxPoolForward(tx, ty, targ, params);
  e.maxPoolBackward(tdy, targ, tdx, params);
  const r = ref.maxPoolForward(f64(x), shape, params);
  assertClose(await e.readF32(ty), r.y, FWD, 'maxPool y');
  // Ties must break the same way on both sides: argmax compared exactly.
  assertClose(await e.read(targ), r.argmax, { rtol: 0, atol: 0 }, 'maxPool argmax');
  assertClose(await e.readF32(tdx), ref.maxPoolBackward(f64(dy), r.argmax, shape, params), GRAD, 'maxPool dx');
  e.release(tx, tdy, ty, targ, tdx);
}

async function avgCase<T extends TensorLike>(e: Engine<T>, shape: number[], params: Pool2dParams | 'global'): Promise<void> {
  const oshape = params === 'global' ? shape.slice(0, 2) : pool2dShape(shape, params);
  const { x, dy } = data(shape, oshape, false);
  const tx = e.upload(x, shape), tdy = e.upload(dy, oshape);
  const ty = e.empty(oshape), tdx = e.empty(shape);
  if (params === 'global') {
    e.globalAvgPoolForward(tx, ty);
    e.globalAvgPoolBackward(tdy, tdx);
  } else {
    e.avgPoolForward(tx, ty, params);
    e.avgPoolBackward(tdy, tdx, params);
  }
  const [ey, edx] = params === 'global'
    ? [ref.globalAvgPoolForward(f64(x), shape), ref.globalAvgPoolBackward(f64(dy), shape)]
    : [ref.avgPoolForward(f64(x), shape, params), ref.avgPoolBackward(f64(dy), shape, params)];
  assertClose(await e.readF32(ty), ey, FWD, 'avgPool y');
  assertClose(await e.readF32(tdx), edx, GRAD, 'avgPool dx');
  e.release(tx, tdy, ty, tdx);
}

const S2 = { kernel: 3, stride: 2, pad: 0 };
const S2P1 = { kernel: 3, stride: 2, pad: 1 };
const windows: [string, number[], Pool2dParams][] = [
  ['3x3 s2 overlapping, batch 1, odd [1, 3, 7, 9]', [1, 3, 7, 9], S2],
  ['3x3 s2 p1, C=5 [2, 5, 6, 7]', [2, 5, 6, 7], S2P1],
  ['2x3 s(1,2) p(1,1) [2, 3, 5, 8]', [2, 3, 5, 8], { kernel: [2, 3], stride: [1, 2], pad: [1, 1] }],
  ['1x1 s2 [2, 3, 5, 5]', [2, 3, 5, 5], { kernel: 1, stride: 2, pad: 0 }],
  ['2x2 s2 (VGG-style) [1, 6, 8, 8]', [1, 6, 8, 8], { kernel: 2, stride: 2, pad: 0 }],
  ['window = whole padded plane [1, 2, 3, 3] k5 p1', [1, 2, 3, 3], { kernel: 5, stride: 1, pad: 1 }],
];

const cases: OpCase[] = [
  ...windows.map(([name, shape, params]): OpCase => ({ name: `max ${name}`, run: (e) => maxCase(e, shape, params) })),
  ...windows.map(([name, shape, params]): OpCase => ({ name: `avg ${name}`, run: (e) => avgCase(e, shape, params) })),
  { name: 'max with many ties (3x3 s2 p1) [2, 3, 9, 9]', run: (e) => maxCase(e, [2, 3, 9, 9], S2P1, true) },
  { name: 'max AlexNet pool1 [1, 96, 55, 55] -> 27x27', run: (e) => maxCase(e, [1, 96, 55, 55], S2) },
  { name: 'max ResNet stem [1, 64, 112, 112] 3x3 s2 p1 -> 56x56', run: (e) => maxCase(e, [1, 64, 112, 112], S2P1) },
  { name: 'global avg [2, 5, 7, 7]', run: (e) => avgCase(e, [2, 5, 7, 7], 'global') },
  { name: 'global avg 1x1 planes [3, 10, 1, 1]', run: (e) => avgCase(e, [3, 10, 1, 1], 'global') },
  { name: 'global avg ResNet-50 head [1, 2048, 7, 7]', run: (e) => avgCase(e, [1, 2048, 7, 7], 'global') },
  // 315 floats per sample, 512-float bindings: one sample per slice, unaligned slice starts.
  { name: 'max split into 2 KiB bindings [3, 5, 7, 9]', gpuOnly: true, run: (e) => withBindingLimit(e.gpu, 2048, () => maxCase(e, [3, 5, 7, 9], S2P1)) },
  { name: 'avg split into 2 KiB bindings [3, 5, 7, 9]', gpuOnly: true, run: (e) => withBindingLimit(e.gpu, 2048, () => avgCase(e, [3, 5, 7, 9], S2P1)) },
];

export const suite: OpSuite = { op: 'pool', cases };
