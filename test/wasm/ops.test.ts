// Every op of the wasm engine against the float64 references (src/ref) on awkward shapes: odd
// sizes, strides 1 and 2, pads 0-2, kernels 1/3/5/11, non-square, accumulate on and off,
// batch 1 and 3; tolerances as test/ops/*.cases.ts use them. Plus bitwise determinism and the
// dropout mask being the reference's bit for bit. (The shared op suites in test/ops also run
// on this engine; these are the wasm engine's own, kernel-path-specific checks.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VtError } from '../../src/errors.ts';
import type { Conv2dParams } from '../../src/shapes/conv2d.ts';
import { conv2dShape, normalizeConv2d } from '../../src/shapes/conv2d.ts';
import { dropoutMask } from '../../src/ref/dropout.ts';
import * as ref from '../../src/ref/index.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WasmEngine, type WasmTensor } from '../../src/wasm/engine.ts';
import { winogradTile } from '../../src/wasm/ops-winograd.ts';
import { assertClose, FWD, GRAD, kTermTol, type Tolerance, WINOGRAD4_ROUNDING } from '../helpers/compare.ts';

let e: WasmEngine;
/** The plain kernels (multiply then add), beside `e`'s default (fused where the runtime has relaxed SIMD). */
let plain: WasmEngine;
beforeAll(async () => {
  e = await WasmEngine.create();
  plain = await WasmEngine.create({ fma: 'off' });
});
afterAll(() => {
  e?.destroy();
  plain?.destroy();
});
/** The GEMM and convolution cases run on both builds of the kernels. */
const BUILDS = [['fused', () => e], ['plain', () => plain]] as const;

const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);
const bitsOf = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
const gemmTol = (K: number): Tolerance => ({ rtol: 1e-5, atol: 2e-6 * Math.sqrt(K) + 1e-6 });
const read = (t: WasmTensor): Promise<Float32Array> => e.readF32(t);

describe('gemm (wasm)', () => {
  interface S { M: number; N: number; K: number; transA?: boolean; transB?: boolean; alpha?: number; beta?: number; batch?: number }
  const shapes: S[] = [
    { M: 1, N: 1, K: 1 },
    { M: 7, N: 9, K: 13 },
    { M: 33, N: 17, K: 5, transA: true },
    { M: 5, N: 31, K: 19, transB: true },
    { M: 12, N: 10, K: 3, transA: true, transB: true },
    { M: 65, N: 129, K: 70, beta: 1, alpha: 0.5 },
    { M: 3, N: 100, K: 257, transB: true, beta: -2 },
    { M: 13, N: 257, K: 300, beta: 0.5 }, // K over one KC block, N not a multiple of 8
    { M: 130, N: 7, K: 257, transA: true, beta: 1 }, // M over one MC block
    { M: 4, N: 9, K: 6, batch: 3 },
    { M: 2, N: 7, K: 12, transB: true, batch: 3, beta: 1 },
    { M: 9, N: 2100, K: 3 }, // N over one NC block
    { M: 5, N: 6, K: 0, beta: 2 }, // empty reduction: C = beta C
  ];
  for (const [build, engine] of BUILDS) for (const s of shapes) {
    it(`${build}: ${s.batch ? `b${s.batch} ` : ''}${s.M}x${s.N}x${s.K}${s.transA ? ' tA' : ''}${s.transB ? ' tB' : ''} ` +
      `alpha ${s.alpha ?? 1} beta ${s.beta ?? 0}`, async () => {
      const e = engine();
      const rng = makeRng(s.M * 1000 + s.N * 10 + s.K);
      const batch = s.batch ?? 1, lead = s.batch ? [batch] : [];
      const a = uniformF32(rng, batch * s.M * s.K), b = uniformF32(rng, batch * s.K * s.N), c0 = uniformF32(rng, batch * s.M * s.N);
      const ta = e.upload(a, [...lead, ...(s.transA ? [s.K, s.M] : [s.M, s.K])]);
      const tb = e.upload(b, [...lead, ...(s.transB ? [s.N, s.K] : [s.K, s.N])]);
      const tc = e.upload(c0, [...lead, s.M, s.N]);
      e.gemm(ta, tb, tc, s);
      const want = new Float64Array(batch * s.M * s.N);
      for (let i = 0; i < batch; i++) want.set(
        ref.gemm.gemm(a.subarray(i * s.M * s.K), b.subarray(i * s.K * s.N), c0.subarray(i * s.M * s.N), s), i * s.M * s.N,
      );
      assertClose(await e.readF32(tc), want, gemmTol(s.K), 'gemm');
      e.release(ta, tb, tc);
    });
  }

  it('beta 0 never reads C (NaN in C does not leak)', async () => {
    // [A shape, B shape, params, C shape, the value every element of C must get]
    const cases: [number[], number[], { transA?: boolean; transB?: boolean }, number[], number][] = [
      [[2, 3], [3, 3], {}, [2, 3], 3],
      [[2, 3], [3, 3], { transB: true }, [2, 3], 3],
      [[2, 3], [2, 5], { transA: true }, [3, 5], 2],
    ];
    for (const [as, bs, p, cs, v] of cases) {
      const ta = e.upload(new Float32Array(prod(as)).fill(1), as), tb = e.upload(new Float32Array(prod(bs)).fill(1), bs);
      const tc = e.upload(new Float32Array(prod(cs)).fill(NaN), cs);
      e.gemm(ta, tb, tc, p);
      expect(Array.from(await read(tc))).toEqual(new Array(prod(cs)).fill(v));
      e.release(ta, tb, tc);
    }
  });

  it('rejects mismatched shapes', () => {
    const a = e.empty([2, 3]), b = e.empty([4, 5]), c = e.empty([2, 5]);
    expect(() => e.gemm(a, b, c)).toThrow(VtError);
    e.release(a, b, c);
  });
});

describe('conv2d (wasm)', () => {
  type G = { x: [number, number, number, number]; w: [number, number, number, number]; p: Conv2dParams };
  const shapes: [string, G][] = [
    ['batch 1, 3x3 p1, odd 7x9, Cin 3', { x: [1, 3, 7, 9], w: [5, 3, 3, 3], p: { stride: 1, pad: 1 } }],
    ['1x1 s1 p0 (pointwise path), Cin 5', { x: [3, 5, 6, 7], w: [7, 5, 1, 1], p: { stride: 1, pad: 0 } }],
    // Pointwise on several images at once where they lie (gemmSeg): row tails (Cout 9), maps of 24 pixels (panel pairs
    // would straddle two images), two blocks of the reduction (Cin 300), and groups of 4 then 2 images (16x16 maps).
    ['1x1 s1 p0 on 3 images of 4x4 at once, Cout 9', { x: [3, 5, 4, 4], w: [9, 5, 1, 1], p: { stride: 1, pad: 0 } }],
    ['1x1 s1 p0 on 5 images of 3x8 at once, Cin 300', { x: [5, 300, 3, 8], w: [11, 300, 1, 1], p: { stride: 1, pad: 0 } }],
    ['1x1 s1 p0, 16x16 maps in groups of 4 and 2', { x: [6, 3, 16, 16], w: [5, 3, 1, 1], p: { stride: 1, pad: 0 } }],
    ['1x1 s2 p0, Cin 13, 9x8', { x: [2, 13, 9, 8], w: [6, 13, 1, 1], p: { stride: 2, pad: 0 } }],
    ['3x3 s2 p1, 11x9', { x: [3, 6, 11, 9], w: [7, 6, 3, 3], p: { stride: 2, pad: 1 } }],
    // Stride 2 on rows of 4 columns at a time (im2col's SIMD path), with tails of 1-3 and rows that end early.
    ['3x3 s2 p1, 7x21', { x: [2, 3, 7, 21], w: [5, 3, 3, 3], p: { stride: 2, pad: 1 } }],
    ['1x1 s2 p0, 5x19', { x: [3, 4, 5, 19], w: [6, 4, 1, 1], p: { stride: 2, pad: 0 } }],
    ['3x3 s2 p0, 9x24', { x: [2, 3, 9, 24], w: [4, 3, 3, 3], p: { stride: 2, pad: 0 } }],
    ['5x5 p2, 13x13', { x: [2, 5, 13, 13], w: [9, 5, 5, 5], p: { stride: 1, pad: 2 } }],
    ['11x11 s4 p2, 3x35x35', { x: [1, 3, 35, 35], w: [13, 3, 11, 11], p: { stride: 4, pad: 2 } }],
    ['non-square: 5x12, kernel 3x5, stride [1, 2], pad [1, 2]', { x: [2, 4, 5, 12], w: [3, 4, 3, 5], p: { stride: [1, 2], pad: [1, 2] } }],
    ['kernel as large as the padded input', { x: [2, 3, 4, 4], w: [4, 3, 6, 6], p: { stride: 1, pad: 1 } }],
    ['1x1 image, 3x3 p1', { x: [3, 2, 1, 1], w: [3, 2, 3, 3], p: { stride: 1, pad: 1 } }],
    ['Cout 37, Cin 17, 3x3 p1 on 16x16 (several gemm panels)', { x: [1, 17, 16, 16], w: [37, 17, 3, 3], p: { stride: 1, pad: 1 } }],
    ['stride 3 > kernel 2', { x: [1, 3, 10, 11], w: [4, 3, 2, 2], p: { stride: 3, pad: 0 } }],
    ['ResNet 3x3 64->64 at 1x8x8', { x: [1, 64, 8, 8], w: [64, 64, 3, 3], p: { stride: 1, pad: 1 } }],
    ['257 wide row, 3x3 p1', { x: [1, 2, 3, 257], w: [3, 2, 3, 3], p: { stride: 1, pad: 1 } }],
  ];
  for (const [build, engine] of BUILDS) for (const [name, g] of shapes) {
    for (const accumulate of [false, true]) {
      it(`${build}: ${name}${accumulate ? ', backward accumulate' : ''}`, async () => {
        const e = engine();
        const rng = makeRng(prod(g.x) + prod(g.w) + (accumulate ? 1 : 0));
        const oshape = conv2dShape(g.x, g.w, g.p);
        const x = uniformF32(rng, prod(g.x)), w = uniformF32(rng, prod(g.w)), dy = uniformF32(rng, prod(oshape));
        const dx0 = uniformF32(rng, prod(g.x)), dw0 = uniformF32(rng, prod(g.w));
        const tx = e.upload(x, g.x), tw = e.upload(w, g.w), tdy = e.upload(dy, oshape);
        const ty = e.upload(uniformF32(rng, prod(oshape)), oshape), tdx = e.upload(dx0, g.x), tdw = e.upload(dw0, g.w);
        e.conv2dForward(tx, tw, ty, g.p);
        e.conv2dBackwardInput(tdy, tw, tdx, g.p, { accumulate });
        e.conv2dBackwardFilter(tx, tdy, tdw, g.p, { accumulate });
        const [cout, cin, kh, kw] = g.w, [n, , oh, ow] = oshape as [number, number, number, number];
        const plus = (a: Float64Array, b: Float32Array): Float64Array => (accumulate ? a.map((v, i) => v + b[i]!) : a);
        // 'auto' runs all three passes by F(4x4, 3x3) on 3x3 stride-1 maps of 8x8 and more: its larger rounding.
        const k = winogradTile(normalizeConv2d(g.x, g.w, g.p), 'auto') === 4 ? WINOGRAD4_ROUNDING : 1;
        assertClose(await e.readF32(ty), ref.conv2d.conv2dForward(f64(x), g.x, f64(w), g.w, g.p), kTermTol(FWD, cin * kh * kw, k), 'conv2d y');
        const edx = plus(ref.conv2d.conv2dBackwardInput(f64(dy), f64(w), g.x, g.w, g.p), dx0);
        assertClose(await e.readF32(tdx), edx, kTermTol(GRAD, cout * kh * kw, k), 'conv2d dx');
        const edw = plus(ref.conv2d.conv2dBackwardFilter(f64(x), f64(dy), g.x, g.w, g.p), dw0);
        assertClose(await e.readF32(tdw), edw, kTermTol(GRAD, n * oh * ow, k), 'conv2d dw');
        e.release(tx, tw, tdy, ty, tdx, tdw);
      });
    }
  }

  it('is bitwise deterministic (same inputs, same bits)', async () => {
    const rng = makeRng(9);
    const xs = [2, 16, 12, 12], ws = [16, 16, 3, 3], p = { stride: 1, pad: 1 };
    const os = conv2dShape(xs, ws, p);
    const tx = e.upload(uniformF32(rng, prod(xs)), xs), tw = e.upload(uniformF32(rng, prod(ws)), ws), tdy = e.upload(uniformF32(rng, prod(os)), os);
    const run = async (): Promise<Float32Array[]> => {
      const y = e.empty(os), dx = e.empty(xs), dw = e.empty(ws);
      e.conv2dForward(tx, tw, y, p);
      e.conv2dBackwardInput(tdy, tw, dx, p);
      e.conv2dBackwardFilter(tx, tdy, dw, p);
      const r = [await read(y), await read(dx), await read(dw)];
      e.release(y, dx, dw);
      return r;
    };
    const [a, b] = [await run(), await run()];
    for (let i = 0; i < 3; i++) expect(Buffer.from(a[i]!.buffer).equals(Buffer.from(b[i]!.buffer))).toBe(true);
    e.release(tx, tw, tdy);
  });

  it('input gradient, accumulate, stride 2: pixels no output reads keep their bits (-0 too); the others add in order', async () => {
    // A 1x1 stride-2 kernel reads only even rows and columns; col2im adds 4 of a row's values at a time onto the even
    // lanes of 8 and must leave the odd lanes as they were, not + 0 (which turns -0 into +0).
    const rng = makeRng(12);
    const xs = [2, 3, 6, 22], ws = [4, 3, 1, 1], p = { stride: 2, pad: 0 }, os = conv2dShape(xs, ws, p);
    const init = uniformF32(rng, prod(xs)).map((v, i) => (i % 3 === 0 ? -0 : v));
    const w = uniformF32(rng, prod(ws)), dy = uniformF32(rng, prod(os));
    const tw = e.upload(w, ws), tdy = e.upload(dy, os), tdx = e.upload(init, xs);
    e.conv2dBackwardInput(tdy, tw, tdx, p, { accumulate: true });
    const got = await read(tdx);
    const want = ref.conv2d.conv2dBackwardInput(f64(dy), f64(w), xs, ws, p);
    const [, , H, W] = xs as [number, number, number, number];
    for (let i = 0; i < got.length; i++) {
      const y = Math.floor(i / W) % H, x = i % W;
      if (y % 2 === 1 || x % 2 === 1) expect(bitsOf(got.subarray(i, i + 1))[0], `pixel ${i}`).toBe(bitsOf(init.subarray(i, i + 1))[0]);
      else expect(Math.abs(got[i]! - (init[i]! + want[i]!))).toBeLessThan(1e-5);
    }
    e.release(tw, tdy, tdx);
  });

  it('rejects a wrong output shape', () => {
    const x = e.empty([1, 3, 5, 5]), w = e.empty([4, 3, 3, 3]), y = e.empty([1, 4, 5, 5]);
    expect(() => e.conv2dForward(x, w, y, { stride: 1, pad: 0 })).toThrow(/out must be \[1, 4, 3, 3\]/);
    e.release(x, w, y);
  });
});

describe('element-wise, bias, relu (wasm)', () => {
  for (const n of [1, 7, 13, 257]) {
    it(`add, addInPlace, fill, relu forward/backward on ${n} elements`, async () => {
      const rng = makeRng(n);
      const x = uniformF32(rng, n), y = uniformF32(rng, n);
      x[0] = 0; // relu at exactly 0
      const tx = e.upload(x), ty = e.upload(y), tz = e.empty([n]), tr = e.empty([n]), td = e.empty([n]);
      e.add(tx, ty, tz);
      assertClose(await read(tz), ref.eltwise.add(f64(x), f64(y)), FWD, 'add');
      e.reluForward(tx, tr);
      assertClose(await read(tr), ref.relu.reluForward(f64(x)), FWD, 'relu');
      e.reluBackward(tx, ty, td);
      assertClose(await read(td), ref.relu.reluBackward(f64(x), f64(y)), FWD, 'relu backward');
      e.addInPlace(tx, ty);
      assertClose(await read(tx), ref.eltwise.add(f64(x), f64(y)), FWD, 'addInPlace');
      e.fill(tz, 0.1);
      assertClose(await read(tz), ref.eltwise.fill(n, Math.fround(0.1)), { rtol: 0, atol: 0 }, 'fill');
      e.release(tx, ty, tz, tr, td);
    });
  }

  for (const shape of [[3, 5, 7, 3], [1, 4, 1, 1], [3, 13], [2, 3, 4, 4]]) {
    for (const accumulate of [false, true]) {
      it(`bias add and backward on [${shape}]${accumulate ? ' accumulate' : ''}`, async () => {
        const rng = makeRng(prod(shape));
        const c = shape[1]!;
        const x = uniformF32(rng, prod(shape)), b = uniformF32(rng, c), db0 = uniformF32(rng, c);
        const tx = e.upload(x, shape), tb = e.upload(b), tdb = e.upload(db0);
        e.biasAddInPlace(tx, tb);
        assertClose(await read(tx), ref.bias.biasForward(f64(x), f64(b), shape), FWD, 'bias add');
        e.biasBackward(tx, tdb, { accumulate });
        const [, db] = ref.bias.biasBackward(ref.bias.biasForward(f64(x), f64(b), shape), shape);
        assertClose(await read(tdb), accumulate ? db.map((v, i) => v + db0[i]!) : db, GRAD, 'bias backward');
        e.release(tx, tb, tdb);
      });
    }
  }

  // The fused bias + ReLU (model.ts runs a conv's or linear layer's bias and the ReLU after it as one op): the bits of
  // biasAddInPlace then reluForward, and of reluBackward then biasBackward; the reference's values. Shapes with planes of
  // 1 (a linear layer), with tails (5, 7 and 3 channels), and specials: 0, -0, NaN, +-Infinity, values that cancel the bias.
  for (const shape of [[3, 5, 7, 3], [2, 7], [4, 3, 1, 1], [2, 6, 4, 4], [1, 2, 3, 5]]) {
    it(`bias + ReLU fused, forward and backward, on [${shape}]: the unfused ops' bits`, async () => {
      const rng = makeRng(prod(shape) + 7);
      const n = prod(shape), c = shape[1]!;
      const x = uniformF32(rng, n), b = uniformF32(rng, c), dy = uniformF32(rng, n), db0 = uniformF32(rng, c);
      const specials = [0, -0, Number.NaN, Infinity, -Infinity];
      specials.forEach((v, i) => { if (i < n) x[(i * 7) % n] = v; });
      x[n - 1] = -b[c - 1]!; // x + b exactly 0
      dy[1 % n] = -0;
      const tx = e.upload(x, shape), tb = e.upload(b), ty = e.empty(shape), tdy = e.upload(dy, shape), tdx = e.empty(shape);
      const tdb = e.upload(db0);
      e.biasRelu(tx, tb, ty);
      const yFused = await read(ty);
      expect(bitsOf(await read(tx)), 'x unchanged').toEqual(bitsOf(x));
      e.reluBiasBackward(ty, tdy, tdx, tdb, { accumulate: true });
      const [dxFused, dbFused] = [await read(tdx), await read(tdb)];
      // Unfused, as the model ran them before.
      const ux = e.upload(x, shape), uy = e.empty(shape), udx = e.empty(shape), udb = e.upload(db0);
      e.biasAddInPlace(ux, tb);
      e.reluForward(ux, uy);
      e.reluBackward(ux, tdy, udx);
      e.biasBackward(udx, udb, { accumulate: true });
      expect(bitsOf(yFused), 'forward').toEqual(bitsOf(await read(uy)));
      expect(bitsOf(dxFused), 'dx').toEqual(bitsOf(await read(udx)));
      expect(bitsOf(dbFused), 'db').toEqual(bitsOf(await read(udb)));
      // And the float64 reference on the finite part (NaN and infinities excepted by construction of the values above).
      const pre = ref.bias.biasForward(f64(x), f64(b), shape);
      const want = ref.relu.reluForward(pre);
      for (let i = 0; i < n; i++) if (Number.isFinite(x[i]!)) expect(Math.abs(yFused[i]! - want[i]!)).toBeLessThanOrEqual(2 ** -22);
      e.release(tx, tb, ty, tdy, tdx, tdb, ux, uy, udx, udb);
    });
  }

  it('bias + ReLU fused: the float64 reference, accumulate off, and size checks', async () => {
    const shape = [3, 5, 7, 3], n = prod(shape), rng = makeRng(99);
    const x = uniformF32(rng, n), b = uniformF32(rng, 5), dy = uniformF32(rng, n);
    const tx = e.upload(x, shape), tb = e.upload(b), ty = e.empty(shape), tdy = e.upload(dy, shape), tdx = e.empty(shape);
    const tdb = e.upload(new Float32Array(5).fill(Number.NaN));
    e.biasRelu(tx, tb, ty);
    const pre = ref.bias.biasForward(f64(x), f64(b), shape);
    assertClose(await read(ty), ref.relu.reluForward(pre), FWD, 'bias + relu');
    e.reluBiasBackward(ty, tdy, tdx, tdb, { accumulate: false }); // NaN in db is overwritten, not added to
    const dx = ref.relu.reluBackward(pre, f64(dy));
    assertClose(await read(tdx), dx, FWD, 'relu backward (fused)');
    assertClose(await read(tdb), ref.bias.biasBackward(dx, shape)[1], GRAD, 'bias backward (fused)');
    expect(() => e.biasRelu(tx, tb, e.view(ty, 0, [7]))).toThrow(/sizes differ/);
    expect(() => e.reluBiasBackward(ty, tdy, tdx, e.view(tdb, 0, [4]), { accumulate: true })).toThrow(/bias has 4 values for 5 channels/);
    e.release(tx, tb, ty, tdy, tdx, tdb);
  });

  it('rejects size mismatches', () => {
    const a = e.empty([3]), b = e.empty([4]);
    expect(() => e.add(a, b, a)).toThrow(VtError);
    expect(() => e.reluForward(a, b)).toThrow(/sizes differ/);
    expect(() => e.biasAddInPlace(e.view(b, 0, [2, 2]), a)).toThrow(/bias has 3 values for 2 channels/);
    e.release(a, b);
  });
});

describe('pooling (wasm)', () => {
  const cases: [number[], { kernel: number | [number, number]; stride: number | [number, number]; pad: number | [number, number] }][] = [
    [[3, 2, 7, 9], { kernel: 2, stride: 2, pad: 0 }],
    [[2, 3, 6, 21], { kernel: 2, stride: 2, pad: 0 }], // 4 windows at a time, then 2 one by one
    [[1, 3, 13, 13], { kernel: 3, stride: 2, pad: 1 }],
    [[2, 2, 5, 6], { kernel: [3, 2], stride: [1, 2], pad: [1, 0] }],
    [[1, 1, 1, 1], { kernel: 1, stride: 1, pad: 0 }],
    [[2, 3, 11, 11], { kernel: 5, stride: 3, pad: 2 }],
  ];
  for (const [shape, p] of cases) {
    it(`max and avg pool on [${shape}] ${JSON.stringify(p)}`, async () => {
      const rng = makeRng(prod(shape));
      const x = uniformF32(rng, prod(shape));
      x[1 % x.length] = x[0]!; // a tie: the first max wins
      const want = ref.pool.maxPoolForward(f64(x), shape, p);
      const os = [shape[0]!, shape[1]!, ...poolOut(shape, p)];
      const tx = e.upload(x, shape), ty = e.empty(os), ta = e.empty(os, 'u32');
      const dy = uniformF32(rng, want.y.length), tdy = e.upload(dy, os), tdx = e.empty(shape);
      e.maxPoolForward(tx, ty, ta, p);
      assertClose(await read(ty), want.y, FWD, 'max pool y');
      expect(Array.from(await e.read(ta))).toEqual(Array.from(want.argmax));
      e.maxPoolBackward(tdy, ta, tdx, p);
      assertClose(await read(tdx), ref.pool.maxPoolBackward(f64(dy), want.argmax, shape, p), GRAD, 'max pool dx');
      e.avgPoolForward(tx, ty, p);
      assertClose(await read(ty), ref.pool.avgPoolForward(f64(x), shape, p), FWD, 'avg pool y');
      e.avgPoolBackward(tdy, tdx, p);
      assertClose(await read(tdx), ref.pool.avgPoolBackward(f64(dy), shape, p), GRAD, 'avg pool dx');
      e.release(tx, ty, ta, tdy, tdx);
    });
  }

  it('2x2 stride-2 max pool (4 windows at a time): ties go to the first in the window, NaN never wins, -Infinity', async () => {
    const shape = [2, 3, 6, 20], n = prod(shape), p = { kernel: 2, stride: 2, pad: 0 };
    const rng = makeRng(5);
    const x = Float32Array.from({ length: n }, () => rng.int(3)); // values 0, 1, 2: ties in most windows
    for (let i = 0; i < n; i += 7) x[i] = NaN;
    for (let i = 3; i < n; i += 11) x[i] = -Infinity;
    const want = ref.pool.maxPoolForward(f64(x), shape, p);
    const os = [shape[0]!, shape[1]!, ...poolOut(shape, p)];
    const tx = e.upload(x, shape), ty = e.empty(os), ta = e.empty(os, 'u32');
    e.maxPoolForward(tx, ty, ta, p);
    expect(Array.from(await e.read(ta))).toEqual(Array.from(want.argmax));
    expect(Array.from(await read(ty))).toEqual(Array.from(want.y));
    e.release(tx, ty, ta);
  });

  it('2x2 stride-2 max pool backward: window by window, and an argmax outside its window (not from forward) as in general', async () => {
    const shape = [2, 3, 7, 19], p = { kernel: 2, stride: 2, pad: 0 }, os = [2, 3, 3, 9];
    const planes = 6, hw = 7 * 19, ohw = 27, rng = makeRng(9);
    const x = uniformF32(rng, prod(shape)), dy = uniformF32(rng, planes * ohw);
    dy[4] = -0; // 0 + -0 is +0, as the general path's add onto a zeroed dx
    const tx = e.upload(x, shape), ty = e.empty(os), ta = e.empty(os, 'u32'), tdy = e.upload(dy, os);
    const tdx = e.upload(new Float32Array(prod(shape)).fill(NaN), shape);
    e.maxPoolForward(tx, ty, ta, p);
    const argmax = new Uint32Array(await e.read(ta));
    argmax[ohw + 5] = 0; // plane 1: inside the plane, outside its window (both this and window 0 write to element 0)
    argmax[2 * ohw + 26] = hw + 3; // plane 2: outside the plane: ignored
    argmax[3 * ohw + 2] = argmax[3 * ohw + 1]!; // plane 3: two windows onto one element (the second outside its window)
    const tb = e.upload(argmax, os);
    e.maxPoolBackward(tdy, tb, tdx, p);
    const want = new Float32Array(prod(shape));
    for (let pl = 0; pl < planes; pl++) {
      for (let j = 0; j < ohw; j++) {
        const a = argmax[pl * ohw + j]!;
        if (a < hw) want[pl * hw + a] = Math.fround(want[pl * hw + a]! + dy[pl * ohw + j]!);
      }
    }
    expect(bitsOf(await read(tdx))).toEqual(bitsOf(want));
    e.release(tx, ty, ta, tdy, tdx, tb);
  });

  // The max pool after a biasRelu, its backward fused with the ReLU's and the bias's (src/nn/model.ts uses it): 2x2 pools
  // on even and odd maps (a row and a column no window covers) and a plane of one window, a 3x3 stride-2 pool
  // (overlapping windows: the general path), an argmax outside its window, -0 and NaN in dy, windows whose max is 0.
  const fusedPools: [number[], { kernel: number; stride: number; pad: number }][] = [
    [[3, 5, 8, 12], { kernel: 2, stride: 2, pad: 0 }],
    [[2, 3, 7, 9], { kernel: 2, stride: 2, pad: 0 }],
    [[4, 2, 2, 2], { kernel: 2, stride: 2, pad: 0 }],
    [[2, 4, 9, 11], { kernel: 3, stride: 2, pad: 1 }],
  ];
  for (const [shape, p] of fusedPools) {
    it(`max pool + ReLU + bias backward fused on [${shape}] ${JSON.stringify(p)}: the unfused ops' bits, and the float64 reference`, async () => {
      const rng = makeRng(prod(shape) + 3);
      const n = prod(shape), c = shape[1]!, os = [shape[0]!, c, ...poolOut(shape, p)], on = prod(os);
      const x = uniformF32(rng, n), b = uniformF32(rng, c), dy = uniformF32(rng, on), db0 = uniformF32(rng, c);
      x.fill(-2, 0, shape[3]! + 2); // ReLU outputs 0 in the first window(s): a max of 0, which the mask stops
      const tx = e.upload(x, shape), tb = e.upload(b), ty = e.empty(shape), tp = e.empty(os), ta = e.empty(os, 'u32');
      e.biasRelu(tx, tb, ty);
      e.maxPoolForward(ty, tp, ta, p);
      const y = await read(ty), argmax = new Uint32Array(await e.read(ta));
      const pre = ref.bias.biasForward(f64(x), f64(b), shape);
      // The float64 reference: the pool's gradient, then the ReLU's mask (> 0 where its input is), then the bias's sums.
      const dxRef = ref.relu.reluBackward(pre, ref.pool.maxPoolBackward(f64(dy), argmax, shape, p));
      const dbRef = ref.bias.biasBackward(dxRef, shape)[1].map((v, i) => v + db0[i]!);
      const fused = async (d: Float32Array, am: Uint32Array, accumulate: boolean, init: Float32Array) => {
        const tdy = e.upload(d, os), tam = e.upload(am, os), tdx = e.upload(new Float32Array(n).fill(NaN), shape), tdb = e.upload(init);
        e.poolReluBiasBackward(tdy, tam, ty, tdx, tdb, { ...p, accumulate });
        const r = { dx: await read(tdx), db: await read(tdb) };
        e.release(tdy, tam, tdx, tdb);
        return r;
      };
      const apart = async (d: Float32Array, am: Uint32Array, accumulate: boolean, init: Float32Array) => {
        const tdy = e.upload(d, os), tam = e.upload(am, os), tg = e.empty(shape), tdx = e.empty(shape), tdb = e.upload(init);
        e.maxPoolBackward(tdy, tam, tg, p);
        e.reluBiasBackward(ty, tg, tdx, tdb, { accumulate });
        const r = { dx: await read(tdx), db: await read(tdb) };
        e.release(tdy, tam, tg, tdx, tdb);
        return r;
      };
      const got = await fused(dy, argmax, true, db0);
      assertClose(got.dx, dxRef, FWD, 'fused dx');
      assertClose(got.db, dbRef, GRAD, 'fused db');
      const hw = shape[2]! * shape[3]!, ohw = on / (shape[0]! * c);
      expect(Array.from(argmax).some((a, j) => y[Math.floor(j / ohw) * hw + a] === 0), 'a window whose max is 0').toBe(true);
      const want = await apart(dy, argmax, true, db0);
      expect(bitsOf(got.dx), 'dx').toEqual(bitsOf(want.dx));
      expect(bitsOf(got.db), 'db').toEqual(bitsOf(want.db));
      // Specials, an argmax moved outside its window (inside the plane), and accumulate off onto NaN.
      const d2 = Float32Array.from(dy), am2 = Uint32Array.from(argmax);
      d2[0] = -0;
      d2[on - 1] = NaN;
      am2[1] = am2[0]!;
      const nan = new Float32Array(c).fill(NaN);
      const [g2, w2] = [await fused(d2, am2, false, nan), await apart(d2, am2, false, nan)];
      expect(bitsOf(g2.dx), 'dx with specials').toEqual(bitsOf(w2.dx));
      expect(bitsOf(g2.db), 'db with specials').toEqual(bitsOf(w2.db));
      e.release(tx, tb, ty, tp, ta);
    });
  }

  it('max pool + ReLU + bias backward fused: size checks', () => {
    const shape = [2, 3, 4, 4], os = [2, 3, 2, 2], p = { kernel: 2, stride: 2, pad: 0, accumulate: true };
    const y = e.empty(shape), dx = e.empty(shape), dy = e.empty(os), a = e.empty(os, 'u32'), db = e.empty([3]);
    expect(() => e.poolReluBiasBackward(dy, a, y, dx, e.view(db, 0, [2]), p)).toThrow(/bias has 2 values for 3 channels/);
    expect(() => e.poolReluBiasBackward(dy, a, e.view(y, 0, [8]), dx, db, p)).toThrow(/sizes differ/);
    expect(() => e.poolReluBiasBackward(e.view(dy, 0, [2, 3, 2, 1]), a, y, dx, db, p)).toThrow(/dy must be f32/);
    e.release(y, dx, dy, a, db);
  });

  for (const shape of [[3, 5, 7, 9], [1, 2, 1, 1], [2, 4, 8, 8]]) {
    it(`global average pool on [${shape}]`, async () => {
      const rng = makeRng(prod(shape));
      const x = uniformF32(rng, prod(shape)), dy = uniformF32(rng, shape[0]! * shape[1]!);
      const tx = e.upload(x, shape), ty = e.empty([shape[0]!, shape[1]!]), tdy = e.upload(dy, [shape[0]!, shape[1]!]), tdx = e.empty(shape);
      e.globalAvgPoolForward(tx, ty);
      assertClose(await read(ty), ref.pool.globalAvgPoolForward(f64(x), shape), FWD, 'gap y');
      e.globalAvgPoolBackward(tdy, tdx);
      assertClose(await read(tdx), ref.pool.globalAvgPoolBackward(f64(dy), shape), GRAD, 'gap dx');
      e.release(tx, ty, tdy, tdx);
    });
  }

  it('rejects an f32 argmax', () => {
    const x = e.empty([1, 1, 4, 4]), y = e.empty([1, 1, 2, 2]), a = e.empty([1, 1, 2, 2]);
    expect(() => e.maxPoolForward(x, y, a, { kernel: 2, stride: 2, pad: 0 })).toThrow(/argmax must be u32/);
    e.release(x, y, a);
  });
});

function poolOut(shape: number[], p: { kernel: number | [number, number]; stride: number | [number, number]; pad: number | [number, number] }): number[] {
  const pr = (v: number | [number, number]): [number, number] => (typeof v === 'number' ? [v, v] : v);
  const [kh, kw] = pr(p.kernel), [sh, sw] = pr(p.stride), [ph, pw] = pr(p.pad);
  return [Math.floor((shape[2]! + 2 * ph - kh) / sh) + 1, Math.floor((shape[3]! + 2 * pw - kw) / sw) + 1];
}

describe('batch norm and LRN (wasm)', () => {
  const P = { eps: 1e-5, momentum: 0.1 };
  const sumTol = (base: Tolerance, m: number): Tolerance => ({ rtol: base.rtol, atol: base.atol * Math.max(1, Math.sqrt(m) / 16) });
  for (const shape of [[1, 3, 1, 1], [1, 3, 5, 7], [3, 5, 3, 3], [4, 10], [3, 7, 16, 16]]) {
    for (const accumulate of [false, true]) {
      it(`batch norm forward, inference, backward on [${shape}]${accumulate ? ' accumulate' : ''}`, async () => {
        const c = shape[1]!, size = prod(shape), m = size / c;
        const rng = makeRng(size + c);
        const x = uniformF32(rng, size, -1, 3), dy = uniformF32(rng, size);
        const gamma = uniformF32(rng, c, 0.5, 1.5), beta = uniformF32(rng, c), rm = uniformF32(rng, c), rv = uniformF32(rng, c, 0.5, 2);
        const dg0 = uniformF32(rng, c), db0 = uniformF32(rng, c);
        const tx = e.upload(x, shape), tdy = e.upload(dy, shape), tg = e.upload(gamma), tb = e.upload(beta), trm = e.upload(rm), trv = e.upload(rv);
        const ty = e.empty(shape), tdx = e.empty(shape), tm = e.empty([c]), ti = e.empty([c]), tyi = e.empty(shape);
        const tdg = e.upload(dg0), tdb = e.upload(db0);
        e.batchNormForward(tx, tg, tb, trm, trv, ty, tm, ti, P);
        e.batchNormBackward(tx, tdy, tg, tm, ti, tdx, tdg, tdb, { accumulate });
        e.batchNormInference(tx, tg, tb, trm, trv, tyi, P);
        const want = ref.batchnorm.batchNormForward(f64(x), shape, f64(gamma), f64(beta), f64(rm), f64(rv), P);
        assertClose(await read(tm), want.mean, FWD, 'bn mean');
        assertClose(await read(ti), want.invstd, FWD, 'bn invstd');
        assertClose(await read(ty), want.y, FWD, 'bn y');
        assertClose(await read(trm), want.runningMean, FWD, 'bn running mean');
        assertClose(await read(trv), want.runningVar, FWD, 'bn running var');
        assertClose(
          await read(tyi), ref.batchnorm.batchNormInference(f64(x), shape, f64(gamma), f64(beta), want.runningMean, want.runningVar, P.eps), FWD,
          'bn inference',
        );
        const g = ref.batchnorm.batchNormBackward(f64(x), f64(dy), shape, f64(gamma), want.mean, want.invstd);
        const plus = (a: Float64Array, b: Float32Array): Float64Array => (accumulate ? a.map((v, i) => v + b[i]!) : a);
        assertClose(await read(tdx), g.dx, GRAD, 'bn dx');
        assertClose(await read(tdg), plus(g.dgamma, dg0), sumTol(GRAD, m), 'bn dgamma');
        assertClose(await read(tdb), plus(g.dbeta, db0), sumTol(GRAD, m), 'bn dbeta');
        e.release(tx, tdy, tg, tb, trm, trv, ty, tdx, tm, ti, tyi, tdg, tdb);
      });
    }
  }

  // BN fused with the ReLU after it (model.ts): the bits of batchNorm* then relu*, the backward's mask recomputed from x.
  // Shapes with tails (planes of 1, 35, 9); x in [-1, 3] with beta in [-1, 1], so the BN output is often <= 0; -0 and 0
  // in dy.
  for (const shape of [[1, 3, 1, 1], [1, 3, 5, 7], [3, 5, 3, 3], [4, 10], [2, 6, 4, 4]]) {
    it(`batch norm + ReLU fused, forward, inference, backward on [${shape}]: the unfused ops' bits`, async () => {
      const c = shape[1]!, size = prod(shape);
      const rng = makeRng(size * 3 + c);
      const x = uniformF32(rng, size, -1, 3), dy = uniformF32(rng, size);
      const gamma = uniformF32(rng, c, 0.5, 1.5), beta = uniformF32(rng, c), rm = uniformF32(rng, c), rv = uniformF32(rng, c, 0.5, 2);
      // Channel 0: every x 0.5 and beta 0, so its BN output is exactly 0 (x = mean): the gate's boundary, closed.
      beta[0] = 0;
      const hw = size / (shape[0]! * c);
      for (let b = 0; b < shape[0]!; b++) x.fill(0.5, b * c * hw, b * c * hw + hw);
      dy[0] = -0;
      if (size > 2) dy[2] = 0;
      const init = uniformF32(rng, c);
      const runOnce = async (fused: boolean): Promise<number[][]> => {
        const tx = e.upload(x, shape), tdy = e.upload(dy, shape), tg = e.upload(gamma), tb = e.upload(beta), trm = e.upload(rm), trv = e.upload(rv);
        const ty = e.empty(shape), tdx = e.empty(shape), tm = e.empty([c]), ti = e.empty([c]), tyi = e.empty(shape);
        const tdg = e.upload(init), tdb = e.upload(init);
        if (fused) {
          e.batchNormReluForward(tx, tg, tb, trm, trv, ty, tm, ti, P);
          e.batchNormReluBackward(tx, tdy, tg, tb, tm, ti, tdx, tdg, tdb, { accumulate: true });
          e.batchNormReluInference(tx, tg, tb, trm, trv, tyi, P);
        } else {
          const bn = e.empty(shape), g = e.empty(shape), bi = e.empty(shape);
          e.batchNormForward(tx, tg, tb, trm, trv, bn, tm, ti, P);
          e.reluForward(bn, ty);
          e.reluBackward(bn, tdy, g);
          e.batchNormBackward(tx, g, tg, tm, ti, tdx, tdg, tdb, { accumulate: true });
          e.batchNormInference(tx, tg, tb, trm, trv, bi, P);
          e.reluForward(bi, tyi);
          e.release(bn, g, bi);
        }
        const out = await Promise.all([ty, tm, ti, trm, trv, tyi, tdx, tdg, tdb].map(async (t) => bitsOf(await read(t))));
        e.release(tx, tdy, tg, tb, trm, trv, ty, tdx, tm, ti, tyi, tdg, tdb);
        return out;
      };
      const [fused, plain] = [await runOnce(true), await runOnce(false)];
      const names = ['y', 'mean', 'invstd', 'running mean', 'running var', 'inference y', 'dx', 'dgamma', 'dbeta'];
      names.forEach((name, i) => expect(fused[i], name).toEqual(plain[i]));
      // Some outputs are gated off and some pass: the mask matters in this case.
      const y = new Float32Array(new Uint32Array(fused[0]!).buffer);
      if (size >= 9) expect(y.some((v) => v === 0) && y.some((v) => v > 0)).toBe(true);
    });
  }

  const lrnCases: [number[], { size: number; alpha: number; beta: number; k: number }][] = [
    [[2, 7, 3, 5], { size: 5, alpha: 1e-4, beta: 0.75, k: 2 }],
    [[1, 3, 1, 1], { size: 5, alpha: 0.5, beta: 0.75, k: 1 }],
    [[3, 6, 4, 4], { size: 2, alpha: 0.3, beta: 0.5, k: 1.5 }],
    [[1, 4, 13], { size: 1, alpha: 1, beta: 1, k: 1 }],
  ];
  for (const [shape, p] of lrnCases) {
    it(`LRN forward and backward on [${shape}] size ${p.size}`, async () => {
      const rng = makeRng(prod(shape) + p.size);
      const x = uniformF32(rng, prod(shape)), dy = uniformF32(rng, prod(shape));
      const tx = e.upload(x, shape), ty = e.empty(shape), tdy = e.upload(dy, shape), tdx = e.empty(shape);
      e.lrnForward(tx, ty, p);
      assertClose(await read(ty), ref.lrn.lrnForward(f64(x), shape, p), FWD, 'lrn y');
      e.lrnBackward(tx, ty, tdy, tdx, p);
      assertClose(await read(tdx), ref.lrn.lrnBackward(f64(x), f64(dy), shape, p), GRAD, 'lrn dx');
      e.release(tx, ty, tdy, tdx);
    });
  }
});

describe('dropout, softmax cross-entropy, top-k (wasm)', () => {
  for (const [n, p, seed] of [[1, 0.5, 0], [7, 0.3, 1], [257, 0.5, 0xffffffff], [1000, 0, 5], [13, 0.999, 42]] as const) {
    it(`dropout on ${n} elements, p ${p}, seed ${seed}: the reference's mask bit for bit`, async () => {
      const rng = makeRng(n);
      const x = uniformF32(rng, n, 0.5, 1); // never 0, so y != 0 exactly where kept
      const tx = e.upload(x), ty = e.empty([n]), tdx = e.empty([n]);
      e.dropoutForward(tx, ty, { p, seed });
      const y = await read(ty);
      const mask = dropoutMask(n, { p, seed });
      expect(Array.from(y, (v) => (v !== 0 ? 1 : 0))).toEqual(Array.from(mask));
      assertClose(y, ref.dropout.dropoutForward(f64(x), { p, seed }), FWD, 'dropout y');
      e.dropoutBackward(tx, tdx, { p, seed });
      expect(Buffer.from((await read(tdx)).buffer).equals(Buffer.from(y.buffer))).toBe(true);
      e.release(tx, ty, tdx);
    });
  }

  for (const [n, k] of [[1, 1], [3, 10], [7, 13], [2, 257]]) {
    it(`softmax cross-entropy and top-k on [${n}, ${k}]`, async () => {
      const rng = makeRng(n * k);
      const logits = uniformF32(rng, n * k, -4, 4);
      const labels = Int32Array.from({ length: n }, (_, i) => (i === 2 ? k : rng.int(k))); // row 2 (if any): out of range
      if (n > 1) logits[k + labels[1]!] = logits[k + ((labels[1]! + 1) % k)]!; // a tie in row 1
      const tl = e.upload(logits, [n, k]), tlab = e.upload(labels), td = e.empty([n, k]), tloss = e.empty([n]), tt = e.empty([1]);
      const scale = 1 / n;
      e.softmaxXent(tl, tlab, td, tloss, tt, { gradScale: scale });
      const losses = ref.softmaxXent.softmaxXentForward(f64(logits), labels, [n, k]);
      assertClose(await read(tloss), losses, FWD, 'losses');
      assertClose(await read(td), ref.softmaxXent.softmaxXentBackward(f64(logits), labels, [n, k], scale), FWD, 'dlogits');
      assertClose(await read(tt), [losses.reduce((a, b) => a + b, 0)], FWD, 'total');
      const counts = e.upload(new Uint32Array([5, 7]));
      for (const accumulate of [false, true]) {
        e.topkCount(tl, tlab, counts, { k: 3, accumulate });
        const [t1, tk] = ref.topk.topkCount(f64(logits), labels, [n, k], 3);
        const got = Array.from(await e.read(counts));
        expect(got).toEqual(accumulate ? [2 * t1, 2 * tk] : [t1, tk]);
      }
      e.release(tl, tlab, td, tloss, tt, counts);
    });
  }

  it('rejects f32 labels and a wrong counts dtype', () => {
    const l = e.empty([2, 3]), lab = e.empty([2]), d = e.empty([2, 3]), loss = e.empty([2]), t = e.empty([1]);
    expect(() => e.softmaxXent(l, lab, d, loss, t, { gradScale: 1 })).toThrow(/labels must be i32/);
    const lab32 = e.empty([2], 'i32');
    expect(() => e.topkCount(l, lab32, t)).toThrow(/counts must be u32/);
    expect(() => e.dropoutForward(l, d, { p: 1, seed: 0 })).toThrow(/p must be in \[0, 1\)/);
    e.release(l, lab, d, loss, t, lab32);
  });
});
