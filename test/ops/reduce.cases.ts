import { segmentTable, sum, sumSquares, sumSquaresSegments, type Segment } from '../../src/ops/reduce.ts';
import { VtError } from '../../src/errors.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import * as ref from '../../src/ref/reduce.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, type Tolerance } from '../helpers/compare.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import type { OpSuite } from './suite.ts';

/**
 * The error bound of the shader's summation tree for n terms: each term passes through at
 * most ITEMS (16) sequential adds, log2(256) tree levels, ceil(chunks / 256) sequential adds
 * of partials and another 8 levels; each add rounds by at most 2^-24 relative, so
 * |error| <= depth * 2^-24 * sum |term| (to first order). Tests use it as the tolerance.
 */
function treeTol(n: number, sumAbs: number): Tolerance {
  const depth = 16 + 8 + Math.ceil(Math.ceil(n / 4096) / 256) + 8;
  return { rtol: 0, atol: depth * 2 ** -24 * sumAbs + 1e-30 };
}

const abs = (x: Float64Array): Float64Array => x.map(Math.abs);

async function checkWhole(gpu: Gpu, n: number): Promise<void> {
  const x = Float64Array.from(uniformF32(makeRng(n), n, -1, 1.2));
  const tx = gpu.upload(Float32Array.from(x)), t1 = gpu.empty([1]), t2 = gpu.empty([1]);
  sum(gpu, tx, t1);
  sumSquares(gpu, tx, t2);
  assertClose(await gpu.readF32(t1), [ref.sum(x)], treeTol(n, ref.sum(abs(x))), 'sum');
  assertClose(await gpu.readF32(t2), [ref.sumSquares(x)], treeTol(n, ref.sumSquares(x)), 'sumSquares');
  gpu.release(tx, t1, t2);
}

/** Reduces w and g over the segments in one call, checks both against float64. */
async function checkSegments(gpu: Gpu, n: number, segs: readonly Segment[]): Promise<void> {
  const rng = makeRng(n + segs.length);
  const w = uniformF32(rng, n, -0.1, 0.1), g = uniformF32(rng, n, -1e-3, 2e-3);
  const tw = gpu.upload(w), tg = gpu.upload(g), table = segmentTable(gpu, segs);
  const ow = gpu.empty([segs.length]), og = gpu.empty([segs.length]);
  sumSquaresSegments(gpu, table, [tw, tg], [ow, og]);
  for (const [name, x, out] of [['||w||^2', w, ow], ['||g||^2', g, og]] as const) {
    const expected = ref.sumSquaresSegments(Float64Array.from(x), segs);
    const got = await gpu.readF32(out);
    segs.forEach(([, len], s) => assertClose([got[s]!], [expected[s]!], treeTol(len, expected[s]!), `${name} segment ${s} (length ${len})`));
  }
  gpu.release(tw, tg, table, ow, og);
}

/** ResNet-50's 161 parameter tensors in order (conv, then BN gamma and beta; fc last). */
export function resnet50Sizes(): number[] {
  const sizes: number[] = [];
  const conv = (cin: number, cout: number, k: number): void => void sizes.push(cin * cout * k * k, cout, cout);
  conv(3, 64, 7);
  let cin = 64;
  for (const [width, blocks] of [[64, 3], [128, 4], [256, 6], [512, 3]] as const) {
    for (let b = 0; b < blocks; b++) {
      conv(cin, width, 1);
      conv(width, width, 3);
      conv(width, width * 4, 1);
      if (b === 0) conv(cin, width * 4, 1);
      cin = width * 4;
    }
  }
  sizes.push(2048 * 1000, 1000);
  return sizes;
}

/** Segments laid out one after another, each starting at a multiple of `align` floats. */
function layout(sizes: readonly number[], align: number): { n: number; segs: Segment[] } {
  let off = 0;
  const segs = sizes.map((len): Segment => {
    const s: Segment = [off, len];
    off = Math.ceil((off + len) / align) * align;
    return s;
  });
  return { n: Math.max(1, off), segs };
}

export const suite: OpSuite = {
  op: 'reduce',
  cases: [
    ...[1, 7, 4095, 4097, 100_003].map((n) => ({ name: `sum and sumSquares n=${n}`, run: (gpu: Gpu) => checkWhole(gpu, n) })),
    { name: 'sum split into 4 KiB bindings n=10000', run: (gpu: Gpu) => withBindingLimit(gpu, 4096, () => checkWhole(gpu, 10_000)) },
    {
      name: 'segments of length 1, 0, 64, odd, unaligned offsets',
      run: (gpu: Gpu) => checkSegments(gpu, 20_000, [[0, 1], [1, 0], [3, 64], [67, 4095], [4162, 4097], [8259, 11_741], [19_999, 1], [20_000, 0]]),
    },
    {
      name: 'a 2.4M segment (ResNet-50 layer4 3x3 conv) between small ones',
      run: (gpu: Gpu) => { const l = layout([64, 2_359_296, 3], 64); return checkSegments(gpu, l.n, l.segs); },
    },
    {
      name: 'ResNet-50 layout scaled down: 161 segments, 64-float aligned',
      run: (gpu: Gpu) => { const l = layout(resnet50Sizes().map((s) => Math.ceil(s / 97)), 64); return checkSegments(gpu, l.n, l.segs); },
    },
    {
      name: 'a segment outside the buffer gives NaN, the others are unaffected',
      async run(gpu: Gpu) {
        const tx = gpu.upload(Float32Array.from([1, 2, 3, 4])), table = segmentTable(gpu, [[0, 2], [3, 2], [2, 2]]), out = gpu.empty([3]);
        sumSquaresSegments(gpu, table, [tx], [out]);
        assertClose(await gpu.readF32(out), [5, NaN, 25], { rtol: 0, atol: 0 }, 'segments');
        gpu.release(tx, table, out);
      },
    },
    {
      name: 'overlapping segments past the scratch capacity give NaN, never a wrong number',
      async run(gpu: Gpu) {
        // 5 copies of [0, 10000): 15 chunks of 4096 but room for ceil(10000 / 4096) + 5 = 8.
        const x = uniformF32(makeRng(4), 10_000), tx = gpu.upload(x), out = gpu.empty([5]);
        const table = segmentTable(gpu, Array.from({ length: 5 }, (): Segment => [0, 10_000]));
        sumSquaresSegments(gpu, table, [tx], [out]);
        const e = ref.sumSquares(Float64Array.from(x));
        assertClose(await gpu.readF32(out), [e, e, NaN, NaN, NaN], treeTol(10_000, e), 'overlapping segments');
        gpu.release(tx, out, table);
      },
    },
    {
      name: 'a flat buffer larger than one binding is a too-large error',
      async run(gpu: Gpu) {
        const tx = gpu.empty([2000]), table = segmentTable(gpu, [[0, 2000]]), out = gpu.empty([1]);
        let kind = 'none';
        await withBindingLimit(gpu, 4096, async () => {
          try {
            sumSquaresSegments(gpu, table, [tx], [out]);
          } catch (e) {
            kind = e instanceof VtError ? e.kind : String(e);
          }
        });
        gpu.release(tx, table, out);
        if (kind !== 'too-large') throw new Error(`expected a too-large VtError, got ${kind}`);
      },
    },
    {
      name: 'bitwise the same on every run (n=300000, 5 segments)',
      async run(gpu: Gpu) {
        const tx = gpu.upload(uniformF32(makeRng(9), 300_000)), out = gpu.empty([5]), whole = gpu.empty([1]);
        const table = segmentTable(gpu, [[0, 1000], [1000, 200_000], [201_000, 0], [201_000, 98_999], [299_999, 1]]);
        const once = async (): Promise<number[]> => {
          sumSquaresSegments(gpu, table, [tx], [out]);
          sum(gpu, tx, whole);
          return [...(await gpu.readF32(out)), ...(await gpu.readF32(whole))];
        };
        const a = await once(), b = await once();
        if (a.some((v, i) => !Object.is(v, b[i]))) throw new Error(`runs differ: [${a}] then [${b}]`);
        gpu.release(tx, out, whole, table);
      },
    },
  ],
};
