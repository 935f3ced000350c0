import { releaseSegmentTable, segmentTable, SPLIT_UNIT, sum, sumSquares, sumSquaresSegments, type Segment } from '../../src/ops/reduce.ts';
import { VtError } from '../../src/errors.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import * as ref from '../../src/ref/reduce.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose, type Tolerance } from '../helpers/compare.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import { gpuOnly, type OpSuite } from './suite.ts';

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

/** Reduces w and g over the segments in one call, checks both against float64; returns the bits. */
async function checkSegments(gpu: Gpu, n: number, segs: readonly Segment[]): Promise<Uint32Array> {
  const rng = makeRng(n + segs.length);
  const w = uniformF32(rng, n, -0.1, 0.1), g = uniformF32(rng, n, -1e-3, 2e-3);
  const tw = gpu.upload(w), tg = gpu.upload(g), table = segmentTable(gpu, segs, n);
  const ow = gpu.empty([segs.length]), og = gpu.empty([segs.length]);
  sumSquaresSegments(gpu, table, [tw, tg], [ow, og]);
  const bits: number[] = [];
  for (const [name, x, out] of [['||w||^2', w, ow], ['||g||^2', g, og]] as const) {
    const expected = ref.sumSquaresSegments(Float64Array.from(x), segs);
    const got = await gpu.readF32(out);
    segs.forEach(([, len], s) => assertClose([got[s]!], [expected[s]!], treeTol(len, expected[s]!), `${name} segment ${s} (length ${len})`));
    bits.push(...new Uint32Array(got.buffer, got.byteOffset, got.length));
  }
  gpu.release(tw, tg, ow, og);
  releaseSegmentTable(gpu, table);
  return Uint32Array.from(bits);
}

/**
 * Checks the segments under each binding limit (bytes) against float64, and that every limit
 * gives the bits of the unlimited run: segments larger than a binding are split on chunk
 * boundaries, so no sum may depend on the limit. Also checks that the limits really split.
 */
async function checkSplit(gpu: Gpu, n: number, segs: readonly Segment[], limits: readonly number[]): Promise<void> {
  const whole = await checkSegments(gpu, n, segs);
  for (const bytes of limits) {
    const windows = await withBindingLimit(gpu, bytes, async () => {
      const t = segmentTable(gpu, segs, n);
      releaseSegmentTable(gpu, t);
      return t.windows.length;
    });
    if (!(windows > 1)) throw new Error(`a ${bytes}-byte limit gives ${windows} window(s): the case would not test splitting`);
    const split = await withBindingLimit(gpu, bytes, () => checkSegments(gpu, n, segs));
    const i = split.findIndex((b, j) => b !== whole[j]);
    if (i >= 0) throw new Error(`with a ${bytes}-byte binding limit (${windows} windows) result ${i} differs from the unsplit one`);
  }
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

// Every case is GPU-only: the WebGPU optimizer's kernels and segment reductions are not Engine ops.
export const suite: OpSuite = {
  op: 'reduce',
  cases: gpuOnly([
    ...[1, 7, 4095, 4097, 100_003].map((n) => ({ name: `sum and sumSquares n=${n}`, run: (gpu: Gpu) => checkWhole(gpu, n) })),
    { name: 'sum split into 4 KiB bindings n=10000', run: (gpu: Gpu) => withBindingLimit(gpu, 4096, () => checkWhole(gpu, 10_000)) },
    {
      name: 'segments of length 1, 0, 64, odd, unaligned offsets',
      run: async (gpu: Gpu) => void (await checkSegments(
        gpu, 20_000, [[0, 1], [1, 0], [3, 64], [67, 4095], [4162, 4097], [8259, 11_741], [19_999, 1], [20_000, 0]],
      )),
    },
    {
      name: 'a 2.4M segment (ResNet-50 layer4 3x3 conv) between small ones',
      run: async (gpu: Gpu) => { const l = layout([64, 2_359_296, 3], 64); await checkSegments(gpu, l.n, l.segs); },
    },
    {
      name: 'ResNet-50 layout scaled down: 161 segments, 64-float aligned',
      run: async (gpu: Gpu) => { const l = layout(resnet50Sizes().map((s) => Math.ceil(s / 97)), 64); await checkSegments(gpu, l.n, l.segs); },
    },
    {
      name: 'a segment outside the buffer gives NaN, the others are unaffected',
      async run(gpu: Gpu) {
        const tx = gpu.upload(Float32Array.from([1, 2, 3, 4])), table = segmentTable(gpu, [[0, 2], [3, 2], [2, 2]], 4), out = gpu.empty([3]);
        sumSquaresSegments(gpu, table, [tx], [out]);
        assertClose(await gpu.readF32(out), [5, NaN, 25], { rtol: 0, atol: 0 }, 'segments');
        gpu.release(tx, out);
        releaseSegmentTable(gpu, table);
      },
    },
    {
      name: 'overlapping segments are each summed in full (the table gives each its own partials)',
      async run(gpu: Gpu) {
        const x = uniformF32(makeRng(4), 10_000), tx = gpu.upload(x), out = gpu.empty([5]);
        const table = segmentTable(gpu, Array.from({ length: 5 }, (): Segment => [0, 10_000]), 10_000);
        sumSquaresSegments(gpu, table, [tx], [out]);
        const e = ref.sumSquares(Float64Array.from(x));
        assertClose(await gpu.readF32(out), [e, e, e, e, e], treeTol(10_000, e), 'overlapping segments');
        gpu.release(tx, out);
        releaseSegmentTable(gpu, table);
      },
    },
    {
      name: 'split: ResNet-50 layout scaled down in 64 KiB and 24 KiB windows, bitwise as unsplit',
      run: (gpu: Gpu) => { const l = layout(resnet50Sizes().map((s) => Math.ceil(s / 97)), 64); return checkSplit(gpu, l.n, l.segs, [65_536, 24_576]); },
    },
    {
      name: 'split: a segment 6x the binding limit between small ones, bitwise as unsplit',
      run: (gpu: Gpu) => { const l = layout([3, 100_003, 1, 0, 5000, 64], 64); return checkSplit(gpu, l.n, l.segs, [65_536, (SPLIT_UNIT + 64) * 4]); },
    },
    {
      name: 'split: unaligned offsets, empty and length-1 segments across windows',
      run: (gpu: Gpu) => checkSplit(
        gpu, 40_000, [[0, 1], [1, 0], [3, 64], [67, 4095], [4162, 4097], [8259, 11_741], [20_000, 0], [20_005, 19_990], [39_999, 1]], [20_480, 32_768],
      ),
    },
    {
      name: 'a binding limit smaller than one chunk is a too-large error',
      async run(gpu: Gpu) {
        let kind = 'none';
        await withBindingLimit(gpu, 4096, async () => {
          try {
            releaseSegmentTable(gpu, segmentTable(gpu, [[0, 2000]], 2000));
          } catch (e) {
            if (!(e instanceof VtError)) throw e;
            kind = e.kind;
          }
        });
        if (kind !== 'too-large') throw new Error(`expected a too-large VtError, got ${kind}`);
      },
    },
    {
      name: 'a table planned for a larger binding limit is refused under a smaller one',
      async run(gpu: Gpu) {
        const tx = gpu.empty([20_000]), table = segmentTable(gpu, [[0, 20_000]], 20_000), out = gpu.empty([1]);
        let kind = 'none';
        await withBindingLimit(gpu, 32_768, async () => {
          try {
            sumSquaresSegments(gpu, table, [tx], [out]);
          } catch (e) {
            if (!(e instanceof VtError)) throw e;
            kind = e.kind;
          }
        });
        gpu.release(tx, out);
        releaseSegmentTable(gpu, table);
        if (kind !== 'too-large') throw new Error(`expected a too-large VtError, got ${kind}`);
      },
    },
    {
      name: 'bitwise the same on every run (n=300000, 5 segments)',
      async run(gpu: Gpu) {
        const tx = gpu.upload(uniformF32(makeRng(9), 300_000)), out = gpu.empty([5]), whole = gpu.empty([1]);
        const table = segmentTable(gpu, [[0, 1000], [1000, 200_000], [201_000, 0], [201_000, 98_999], [299_999, 1]], 300_000);
        const once = async (): Promise<number[]> => {
          sumSquaresSegments(gpu, table, [tx], [out]);
          sum(gpu, tx, whole);
          return [...(await gpu.readF32(out)), ...(await gpu.readF32(whole))];
        };
        const a = await once(), b = await once();
        if (a.some((v, i) => !Object.is(v, b[i]))) throw new Error(`runs differ: [${a}] then [${b}]`);
        gpu.release(tx, out, whole);
        releaseSegmentTable(gpu, table);
      },
    },
  ]),
};
