// Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions of the wasm engine (src/wasm/ops-winograd.ts): all three
// passes of each against the float64 reference on awkward shapes (odd sizes, a 1x1 output, every padding 0..2,
// asymmetric padding, 1 and 3 channels, groups of images, accumulate on top of random contents),
// bitwise equal for 1, 2 and 3 threads on every way of splitting (groups of images; every thread
// on one group; the filter gradient's per-group sums added in order), which layers 'auto' sends to
// Winograd, and a ResNet-20 gradient that agrees with im2col's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Conv2dParams, conv2dShape, normalizeConv2d } from '../../src/shapes/conv2d.ts';
import * as ref from '../../src/ref/conv2d.ts';
import { Model } from '../../src/nn/model.ts';
import { resnet20 } from '../../src/nn/models.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { recordGradients, uploadBatch } from '../../src/train/step.ts';
import { WasmEngine, type WasmTensor } from '../../src/wasm/engine.ts';
import { winogradFits, winogradTile } from '../../src/wasm/ops-winograd.ts';
import { VtError } from '../../src/errors.ts';
import { assertClose, FWD, GRAD, kTermTol, WINOGRAD4_ROUNDING } from '../helpers/compare.ts';

const COUNTS = [1, 2, 3] as const;
/** The two algorithms, each forced onto every 3x3 stride-1 convolution. */
const MODES = [['F(2x2, 3x3)', 'always'], ['F(4x4, 3x3)', 'always4']] as const;
type Forced = (typeof MODES)[number][1];
const always: Record<Forced, WasmEngine[]> = { always: [], always4: [] };
let off: WasmEngine;
beforeAll(async () => {
  for (const [, mode] of MODES) always[mode] = await Promise.all(COUNTS.map((threads) => WasmEngine.create({ threads, winograd: mode, initialMiB: 16 })));
  off = await WasmEngine.create({ threads: 1, winograd: 'off', initialMiB: 16 });
});
afterAll(() => {
  for (const [, mode] of MODES) for (const e of always[mode]) e.destroy();
  off.destroy();
});

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
const bits = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length);
const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);
/**
 * kTermTol's growth of each algorithm: F(4x4, 3x3) rounds more by a constant factor (9-20x F(2x2, 3x3)'s largest error
 * on ResNet's shapes): these cases need 3x the k 2^-24 term (1x fails 8 of them), bound at WINOGRAD4_ROUNDING.
 */
const GROWTH: Record<Forced, number> = { always: 1, always4: WINOGRAD4_ROUNDING };

interface Case { x: [number, number, number, number]; cout: number; p: Conv2dParams }

/** The three passes into outputs that start as `init` (accumulate adds onto them). */
async function passes(e: WasmEngine, c: Case, x: Float32Array, w: Float32Array, dy: Float32Array, accumulate: boolean,
  init: [Float32Array, Float32Array]): Promise<Float32Array[]> {
  const wShape = [c.cout, c.x[1], 3, 3], yShape = conv2dShape(c.x, wShape, c.p);
  const tx = e.upload(x, c.x), tw = e.upload(w, wShape), tdy = e.upload(dy, yShape);
  const y = e.empty(yShape), dx = e.upload(init[0], c.x), dw = e.upload(init[1], wShape);
  const ts: WasmTensor[] = [tx, tw, tdy, y, dx, dw];
  try {
    e.conv2dForward(tx, tw, y, c.p);
    e.conv2dBackwardInput(tdy, tw, dx, c.p, { accumulate });
    e.conv2dBackwardFilter(tx, tdy, dw, c.p, { accumulate });
    return [await e.readF32(y), await e.readF32(dx), await e.readF32(dw)];
  } finally {
    e.release(...ts);
  }
}

function problem(c: Case, seed: number): { x: Float32Array; w: Float32Array; dy: Float32Array; init: [Float32Array, Float32Array] } {
  const rng = makeRng(seed);
  const wShape = [c.cout, c.x[1], 3, 3], yShape = conv2dShape(c.x, wShape, c.p);
  return {
    x: uniformF32(rng, prod(c.x)), w: uniformF32(rng, prod(wShape)), dy: uniformF32(rng, prod(yShape)),
    init: [uniformF32(rng, prod(c.x)), uniformF32(rng, prod(wShape))],
  };
}

describe.each(MODES)('%s against the float64 reference (every 3x3 stride-1 shape runs by it)', (_, mode) => {
  const cases: [string, Case][] = [
    ['odd 7x9, Cin 3, Cout 5', { x: [1, 3, 7, 9], cout: 5, p: { stride: 1, pad: 1 } }],
    ['pad 0, odd 5x13 (odd output 3x11)', { x: [2, 9, 5, 13], cout: 10, p: { stride: 1, pad: 0 } }],
    ['pad 2, Cin 1', { x: [3, 1, 6, 5], cout: 4, p: { stride: 1, pad: 2 } }],
    ['asymmetric pad [0, 2], 4x11', { x: [2, 6, 4, 11], cout: 7, p: { stride: 1, pad: [0, 2] } }],
    ['1x1 output (3x3 input, pad 0)', { x: [4, 8, 3, 3], cout: 8, p: { stride: 1, pad: 0 } }],
    ['1-row input, pad 1', { x: [2, 5, 1, 10], cout: 3, p: { stride: 1, pad: 1 } }],
    ['Cout 37, Cin 17, 6x7', { x: [1, 17, 6, 7], cout: 37, p: { stride: 1, pad: 1 } }],
    ['ResNet 64 -> 64 at 2x14x14', { x: [2, 64, 14, 14], cout: 64, p: { stride: 1, pad: 1 } }],
    ['groups of images: 40 of 8x8 (groups of 16)', { x: [40, 12, 8, 8], cout: 9, p: { stride: 1, pad: 1 } }],
    ['wide map 30x70 (tile rows of 35)', { x: [1, 4, 30, 70], cout: 6, p: { stride: 1, pad: 1 } }],
    ['Cin 260: the reduction over two GEMM blocks', { x: [2, 260, 4, 5], cout: 5, p: { stride: 1, pad: 1 } }],
    ['4 whole tiles a row and an edge: 2 of 21x19, pad 1', { x: [2, 10, 21, 19], cout: 11, p: { stride: 1, pad: 1 } }],
    ['width 4, the narrowest plane read where it lies (F(4x4)), pad 2', { x: [2, 3, 5, 4], cout: 4, p: { stride: 1, pad: 2 } }],
  ];
  for (const [i, [name, c]] of cases.entries()) {
    for (const accumulate of [false, true]) {
      it(`${name}${accumulate ? ', accumulate' : ''}`, async () => {
        const pr = problem(c, 50 + i);
        const wShape = [c.cout, c.x[1], 3, 3];
        const g = normalizeConv2d(c.x, wShape, c.p);
        const [y, dx, dw] = await passes(always[mode][0]!, c, pr.x, pr.w, pr.dy, accumulate, pr.init);
        const ey = ref.conv2dForward(f64(pr.x), c.x, f64(pr.w), wShape, c.p);
        const edx = ref.conv2dBackwardInput(f64(pr.dy), f64(pr.w), c.x, wShape, c.p);
        const edw = ref.conv2dBackwardFilter(f64(pr.x), f64(pr.dy), c.x, wShape, c.p);
        const plus = (e: Float64Array, init: Float32Array): Float64Array => (accumulate ? e.map((v, j) => v + init[j]!) : e);
        const k = GROWTH[mode];
        assertClose(y!, ey, kTermTol(FWD, g.cin * 9, k), 'winograd y');
        assertClose(dx!, plus(edx, pr.init[0]), kTermTol(GRAD, g.cout * 9, k), 'winograd dx');
        assertClose(dw!, plus(edw, pr.init[1]), kTermTol(GRAD, g.n * g.oh * g.ow, k), 'winograd dw');
      });
    }
  }
});

describe.each(MODES)('%s bitwise equal for 1, 2, 3 threads', (_, mode) => {
  const cases: [string, Case][] = [
    ['groups split between threads (64 images of 8x8, groups of 16)', { x: [64, 16, 8, 8], cout: 16, p: { stride: 1, pad: 1 } }],
    ['every thread on one group (1 image of 40x36)', { x: [1, 24, 40, 36], cout: 20, p: { stride: 1, pad: 1 } }],
    ['groups of one image, odd count (5 of 32x32)', { x: [5, 16, 32, 32], cout: 16, p: { stride: 1, pad: 1 } }],
    ['odd map, pad 0 and 2 (3 of 17x15)', { x: [3, 12, 17, 15], cout: 10, p: { stride: 1, pad: [0, 2] } }],
    ['groups of 2 images of 32x32, 4 tiles crossing a panel (9 images)', { x: [9, 8, 32, 32], cout: 8, p: { stride: 1, pad: 1 } }],
  ];
  for (const [i, [name, c]] of cases.entries()) {
    it(name, async () => {
      const pr = problem(c, 70 + i);
      const out: Float32Array[][] = [];
      for (const e of always[mode]) out.push(await passes(e, c, pr.x, pr.w, pr.dy, true, pr.init));
      for (let t = 1; t < out.length; t++) {
        for (const [k, what] of ['y', 'dx', 'dw'].entries()) {
          const a = bits(out[0]![k]!), b = bits(out[t]![k]!);
          const first = a.findIndex((v, j) => v !== b[j]);
          expect(first, `${what}: ${COUNTS[t]} threads differ from 1 thread first at element ${first} of ${a.length}`).toBe(-1);
        }
      }
    });
  }
});

describe('which convolutions run by Winograd', () => {
  const geo = (n: number, cin: number, hw: number, cout: number, k: number, stride: number, pad: number) =>
    normalizeConv2d([n, cin, hw, hw], [cout, cin, k, k], { stride, pad });
  it("'auto': ResNet's 3x3 stride-1 layers with enough channels and tiles an image; never other kernels, strides or pads", () => {
    expect(winogradTile(geo(64, 16, 32, 16, 3, 1, 1), 'f2')).toBe(2); // ResNet-20, stage 1
    expect(winogradTile(geo(64, 16, 32, 16, 3, 1, 1), 'auto')).toBe(4);
    expect(winogradTile(geo(64, 64, 8, 64, 3, 1, 1), 'auto')).toBe(4); // ResNet-20, stage 3
    expect(winogradTile(geo(16, 128, 8, 128, 3, 1, 1), 'auto')).toBe(4); // ResNet-50 at 64 px, stage 2
    expect(winogradTile(geo(4, 512, 7, 512, 3, 1, 1), 'auto')).toBe(2); // ResNet-50 at 224 px, stage 4: 16 2x2 tiles an image
    expect(winogradTile(geo(4, 512, 7, 512, 3, 1, 1), 'f2')).toBe(2);
    expect(winogradTile(geo(1, 1, 3, 1, 3, 1, 0), 'always4')).toBe(4);
    expect(winogradFits(geo(16, 256, 4, 256, 3, 1, 1), 'auto')).toBe(false); // 4 tiles an image: the filter's transforms dominate
    expect(winogradFits(geo(16, 512, 2, 512, 3, 1, 1), 'auto')).toBe(false);
    // Never by the batch: one image and a batch of 64 meet the same arithmetic.
    for (const [c, hw] of [[16, 32], [128, 8], [256, 4], [512, 2]] as const) {
      expect(winogradFits(geo(1, c, hw, c, 3, 1, 1), 'auto'), `${c} channels at ${hw}x${hw}`).toBe(winogradFits(geo(64, c, hw, c, 3, 1, 1), 'auto'));
    }
    expect(winogradFits(geo(64, 3, 32, 16, 3, 1, 1), 'auto')).toBe(false); // the stem: 3 channels
    expect(winogradFits(geo(64, 16, 32, 32, 3, 2, 1), 'auto')).toBe(false);
    expect(winogradFits(geo(64, 16, 32, 32, 1, 1, 0), 'auto')).toBe(false);
    expect(winogradFits(geo(64, 16, 32, 32, 3, 1, 3), 'always')).toBe(false); // the input gradient would need padding -1
    expect(winogradFits(geo(1, 1, 3, 1, 3, 1, 0), 'always')).toBe(true);
    expect(winogradFits(geo(64, 16, 32, 16, 3, 1, 1), 'off')).toBe(false);
    expect(winogradTile(geo(64, 3, 32, 16, 3, 1, 1), 'auto')).toBe(0);
    expect(winogradTile(geo(64, 3, 32, 16, 3, 1, 1), 'f2')).toBe(0);
    expect(winogradTile(geo(64, 16, 32, 16, 3, 1, 3), 'always4')).toBe(0);
  });
  it('refuses an unknown mode with a clear error', async () => {
    await expect(WasmEngine.create({ winograd: 'fast' as 'auto' })).rejects.toThrow(VtError);
    await expect(WasmEngine.create({ winograd: 'fast' as 'auto' })).rejects.toThrow(/'auto', 'f2', 'always', 'always4', 'off'/);
  });
});

it.each(['auto', 'f2'] as const)("'%s': an image's forward and input gradient have the same bits in a batch of 8 as in 2 micro-batches of 4", async (mode) => {
  // What micro-batching relies on (test/e2e/micro-batch.test.ts): the algorithm and its summation order never depend on the batch.
  const e = await WasmEngine.create({ threads: 2, initialMiB: 16, winograd: mode });
  try {
    for (const [c, hw] of [[16, 16], [128, 8], [64, 4]] as const) {
      const xs = [8, c, hw, hw], ws = [c, c, 3, 3], p = { stride: 1, pad: 1 };
      const rng = makeRng(c + hw);
      const x = uniformF32(rng, prod(xs)), w = uniformF32(rng, prod(ws)), dy = uniformF32(rng, prod(xs));
      const run = async (n: number, at: number): Promise<[Float32Array, Float32Array]> => {
        const per = c * hw * hw, shape = [n, c, hw, hw];
        const tx = e.upload(x.subarray(at * per, (at + n) * per), shape), tw = e.upload(w, ws), tdy = e.upload(dy.subarray(at * per, (at + n) * per), shape);
        const y = e.empty(shape), dx = e.empty(shape);
        e.conv2dForward(tx, tw, y, p);
        e.conv2dBackwardInput(tdy, tw, dx, p);
        const out: [Float32Array, Float32Array] = [await e.readF32(y), await e.readF32(dx)];
        e.release(tx, tw, tdy, y, dx);
        return out;
      };
      const whole = await run(8, 0), a = await run(4, 0), b = await run(4, 4);
      for (const k of [0, 1] as const) {
        const parts = new Float32Array(whole[k].length);
        parts.set(a[k]);
        parts.set(b[k], a[k].length);
        const want = bits(parts);
        expect(bits(whole[k]).every((v, i) => v === want[i]), `${c} channels at ${hw}x${hw}, ${k ? 'dx' : 'y'}`).toBe(true);
      }
    }
  } finally {
    e.destroy();
  }
});

it.each(MODES)("a ResNet-20 gradient by %s agrees with im2col's (batch 4, 32x32)", async (_, mode) => {
  const spec = resnet20([3, 32, 32], 10);
  const grads = async (e: WasmEngine): Promise<Float32Array> => {
    const model = new Model(e, spec, { seed: 5 });
    const rng = makeRng(13);
    const x = uploadBatch(model, { x: uniformF32(rng, 4 * 3 * 32 * 32), labels: Int32Array.from([1, 4, 7, 2]), shape: [4, 3, 32, 32] }, null);
    try {
      recordGradients(model, x, 4);
      return await e.readF32(model.grads);
    } finally {
      e.release(x);
      model.destroy();
    }
  };
  const a = await grads(always[mode][0]!), b = await grads(off);
  expect(a.some((v) => v !== 0)).toBe(true);
  if (mode === 'always') {
    // Relative to the largest gradient: the two differ only by float32 rounding in other orders.
    const scale = b.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    assertClose(a, b, { rtol: 1e-3, atol: 1e-4 * scale }, 'ResNet-20 gradient, winograd against im2col');
    return;
  }
  // F(4x4, 3x3) rounds more, and this net at batch 4 (batch norm over 4 images, ReLUs) turns a difference in the
  // last bits into a gradient that moves by about 1e-2 of its norm: im2col itself moves that much when every weight
  // is scaled by 1 + 1e-6 u (u uniform in [-1, 1]; measured). So the bound is on the whole gradient: a wrong tile,
  // position or transform moves it by its own size.
  let d2 = 0, b2 = 0;
  for (let i = 0; i < a.length; i++) {
    d2 += (a[i]! - b[i]!) ** 2;
    b2 += b[i]! ** 2;
  }
  expect(Math.sqrt(d2 / b2), 'ResNet-20 gradient, F(4x4, 3x3) against im2col: relative distance').toBeLessThan(3e-2);
});
