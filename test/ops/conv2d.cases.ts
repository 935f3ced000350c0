import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import { conv2dBatchChunks, conv2dShape, normalizeConv2d, type Conv2dParams } from '../../src/ops/conv2d.ts';
import * as ref from '../../src/ref/conv2d.ts';
import { VtError } from '../../src/errors.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { makeRng, uniformF32, type Rng } from '../../src/rng.ts';
import { winogradTile } from '../../src/wasm/ops-winograd.ts';
import { assertClose, FWD, GRAD, kTermTol, WINOGRAD4_ROUNDING } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

type Shape4 = [number, number, number, number];
interface Geometry { x: Shape4; w: Shape4; p: Conv2dParams }

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
const f64 = (a: Float32Array): Float64Array => Float64Array.from(a);

/**
 * kTermTol's growth for the three passes of g on engine e: the wasm engine's default ('auto') runs them by Winograd
 * F(4x4, 3x3) on 3x3 stride-1 maps of 8x8 and more.
 */
function f4Growth(e: Engine<TensorLike>, g: Geometry): number {
  return e.info.backend === 'wasm' && winogradTile(normalizeConv2d(g.x, g.w, g.p), 'auto') === 4 ? WINOGRAD4_ROUNDING : 1;
}


// Awkward shapes first, then the real layers at reduced batch and size.
const shapes: [string, Geometry][] = [
  ['batch 1, 3x3 p1, odd 7x9, Cin 3', { x: [1, 3, 7, 9], w: [5, 3, 3, 3], p: { stride: 1, pad: 1 } }],
  ['1x1 s1, Cin 5', { x: [2, 5, 6, 6], w: [7, 5, 1, 1], p: { stride: 1, pad: 0 } }],
  ['1x1 s2 p0 (ResNet downsample), Cin 13, odd 9x8', { x: [2, 13, 9, 8], w: [6, 13, 1, 1], p: { stride: 2, pad: 0 } }],
  ['3x3 s2 p1, 11x9', { x: [2, 6, 11, 9], w: [7, 6, 3, 3], p: { stride: 2, pad: 1 } }],
  ['5x5 p2, Cin 5', { x: [2, 5, 13, 13], w: [9, 5, 5, 5], p: { stride: 1, pad: 2 } }],
  ['7x7 s2 p3 (ResNet stem), 3x20x18', { x: [1, 3, 20, 18], w: [10, 3, 7, 7], p: { stride: 2, pad: 3 } }],
  ['11x11 s4 p2 (AlexNet conv1), 3x35x35', { x: [1, 3, 35, 35], w: [13, 3, 11, 11], p: { stride: 4, pad: 2 } }],
  ['asymmetric: 5x12 input, 3x5 kernel, stride [1, 2], pad [1, 2]', { x: [2, 4, 5, 12], w: [3, 4, 3, 5], p: { stride: [1, 2], pad: [1, 2] } }],
  ['Cout 37 and Cin 17 (not multiples of any block)', { x: [1, 17, 6, 7], w: [37, 17, 3, 3], p: { stride: 1, pad: 1 } }],
  ['stride 3 > kernel 2 (input pixels no tap touches)', { x: [1, 3, 10, 11], w: [4, 3, 2, 2], p: { stride: 3, pad: 0 } }],
  ['kernel as large as the padded input (1x1 output)', { x: [2, 3, 4, 4], w: [4, 3, 6, 6], p: { stride: 1, pad: 1 } }],
  ['long filter-gradient reduction (split into ranges, 4x64x128 per tap)', { x: [4, 2, 64, 128], w: [3, 2, 3, 3], p: { stride: 1, pad: 1 } }],
  ['ResNet 3x3 64->64 at 2x14x14', { x: [2, 64, 14, 14], w: [64, 64, 3, 3], p: { stride: 1, pad: 1 } }],
  ['ResNet 3x3 s2 64->128 at 1x15x15', { x: [1, 64, 15, 15], w: [128, 64, 3, 3], p: { stride: 2, pad: 1 } }],
  ['AlexNet conv2 5x5 p2 48->64 at 1x13x13', { x: [1, 48, 13, 13], w: [64, 48, 5, 5], p: { stride: 1, pad: 2 } }],
];

interface Problem<T extends TensorLike> {
  x: Float32Array; w: Float32Array; dy: Float32Array;
  tx: T; tw: T; tdy: T;
  oshape: number[];
}

function upload<T extends TensorLike>(e: Engine<T>, g: Geometry, rng: Rng): Problem<T> {
  const oshape = conv2dShape(g.x, g.w, g.p);
  const x = uniformF32(rng, prod(g.x)), w = uniformF32(rng, prod(g.w)), dy = uniformF32(rng, prod(oshape));
  return { x, w, dy, oshape, tx: e.upload(x, g.x), tw: e.upload(w, g.w), tdy: e.upload(dy, oshape) };
}

/** Runs all three passes into fresh outputs and reads them back. */
async function runAll<T extends TensorLike>(e: Engine<T>, g: Geometry, pr: Problem<T>): Promise<[Float32Array, Float32Array, Float32Array]> {
  const out = e.empty(pr.oshape), dx = e.empty(g.x), dw = e.empty(g.w);
  e.conv2dForward(pr.tx, pr.tw, out, g.p);
  e.conv2dBackwardInput(pr.tdy, pr.tw, dx, g.p);
  e.conv2dBackwardFilter(pr.tx, pr.tdy, dw, g.p);
  const r: [Float32Array, Float32Array, Float32Array] = [await e.readF32(out), await e.readF32(dx), await e.readF32(dw)];
  e.release(out, dx, dw);
  return r;
}

function expected(g: Geometry, pr: Problem<TensorLike>): [Float64Array, Float64Array, Float64Array] {
  return [
    ref.conv2dForward(f64(pr.x), g.x, f64(pr.w), g.w, g.p),
    ref.conv2dBackwardInput(f64(pr.dy), f64(pr.w), g.x, g.w, g.p),
    ref.conv2dBackwardFilter(f64(pr.x), f64(pr.dy), g.x, g.w, g.p),
  ];
}

async function checkAll<T extends TensorLike>(e: Engine<T>, g: Geometry, seed: number): Promise<void> {
  const pr = upload(e, g, makeRng(seed));
  const [out, dx, dw] = await runAll(e, g, pr);
  const [eo, edx, edw] = expected(g, pr);
  const [, cin, , ] = g.x, [cout, , kh, kw] = g.w, [n, , oh, ow] = pr.oshape as Shape4;
  const [sh, sw] = typeof g.p.stride === 'number' ? [g.p.stride, g.p.stride] : g.p.stride;
  const k = f4Growth(e, g);
  assertClose(out, eo, kTermTol(FWD, cin * kh * kw, k), 'conv2d out');
  assertClose(dx, edx, kTermTol(GRAD, cout * Math.ceil(kh / sh) * Math.ceil(kw / sw), k), 'conv2d dx');
  assertClose(dw, edw, kTermTol(GRAD, n * oh * ow, k), 'conv2d dw');
  e.release(pr.tx, pr.tw, pr.tdy);
}

function expectVtError(kind: VtError['kind'], f: () => void, what: string): void {
  try {
    f();
  } catch (e) {
    if (e instanceof VtError && e.kind === kind) return;
    throw new Error(`${what}: expected a VtError '${kind}', got ${String(e)}`);
  }
  throw new Error(`${what}: expected a VtError '${kind}', nothing was thrown`);
}

const shapeCases: OpCase[] = shapes.map(([name, g], i) => ({
  name: `${name}: forward, backward input, backward filter`,
  run: (e) => checkAll(e, g, 100 + i),
}));

const small: Geometry = { x: [2, 5, 9, 7], w: [6, 5, 3, 3], p: { stride: 2, pad: 1 } };

/** dx += ..., dw += ... on top of random contents. */
async function checkAccumulate<T extends TensorLike>(e: Engine<T>): Promise<void> {
  const rng = makeRng(3);
  const pr = upload(e, small, rng);
  const dx0 = uniformF32(rng, prod(small.x)), dw0 = uniformF32(rng, prod(small.w));
  const dx = e.upload(dx0, small.x), dw = e.upload(dw0, small.w);
  e.conv2dBackwardInput(pr.tdy, pr.tw, dx, small.p, { accumulate: true });
  e.conv2dBackwardFilter(pr.tx, pr.tdy, dw, small.p, { accumulate: true });
  const [, edx, edw] = expected(small, pr);
  assertClose(await e.readF32(dx), edx.map((v, i) => v + dx0[i]!), GRAD, 'dx += ...');
  assertClose(await e.readF32(dw), edw.map((v, i) => v + dw0[i]!), GRAD, 'dw += ...');
  e.release(pr.tx, pr.tw, pr.tdy, dx, dw);
}

const BLOCKED = ['conv2d_fwd', 'conv2d_bwd_input', 'conv2d_bwd_filter'];

/** Runs f with gpu.tuning entries set (which also selects the variant), then removes them. */
async function withTuning(gpu: Gpu, entries: [string, Record<string, number>][], f: () => Promise<void>): Promise<void> {
  for (const [k, v] of entries) gpu.tuning.set(k, v);
  try {
    await f();
  } finally {
    for (const [k] of entries) gpu.tuning.delete(k);
  }
}

// The shapes the tiled variant is also checked on (indices into `shapes`): odd sizes, every
// stride phase pattern, channel counts off the tile, the long split reduction, a real layer.
const tiledShapes = ['batch 1', '1x1 s2', '7x7', '11x11', 'asymmetric', 'Cout 37', 'stride 3', 'long filter', 'ResNet 3x3 s2'];

/** The shape whose name starts with `prefix`. */
function shape(prefix: string): Geometry {
  const found = shapes.find(([name]) => name.startsWith(prefix));
  if (!found) throw new Error(`no test shape named ${prefix}...`);
  return found[1];
}

const otherCases: OpCase[] = [
  {
    name: 'blocked variant (CPU drivers) with tuned BM = 3, WG = 32',
    gpuOnly: true,
    run: (e) => withTuning(e.gpu, BLOCKED.map((k) => [k, { BM: 3, WG: 32 }]), async () => {
      await checkAll(e, shape('Cout 37'), 7);
      await checkAll(e, small, 8);
    }),
  },
  {
    name: 'blocked variant with its default block sizes (whatever the adapter)',
    gpuOnly: true,
    run: (e) => withTuning(e.gpu, BLOCKED.map((k) => [k, {}]), () => checkAll(e, small, 9)),
  },
  ...tiledShapes.map((prefix, i): OpCase => ({
    name: `tiled variant (GPUs): ${prefix}...`,
    gpuOnly: true,
    run: (e) => withTuning(e.gpu, [['conv2d_tiled', {}]], () => checkAll(e, shape(prefix), 200 + i)),
  })),
  {
    name: 'tiled variant with a small tile (WGX = 8, WGY = 4, BK = 8) and accumulate',
    gpuOnly: true,
    run: (e) => withTuning(e.gpu, [['conv2d_tiled', { WGX: 8, WGY: 4, BK: 8 }]], async () => {
      await checkAll(e, shape('Cout 37'), 10);
      await checkAccumulate(e);
    }),
  },
  {
    name: 'accumulate adds into dx and dw (micro-batch gradient sums)',
    run: (e) => checkAccumulate(e),
  },
  {
    name: 'bitwise identical results on repeated runs',
    async run(e) {
      const g = shape('11x11');
      const pr = upload(e, g, makeRng(4));
      const a = await runAll(e, g, pr), b = await runAll(e, g, pr);
      a.forEach((r, k) => {
        const u = new Uint32Array(r.buffer, r.byteOffset, r.length), v = new Uint32Array(b[k]!.buffer, b[k]!.byteOffset, r.length);
        const i = u.findIndex((bits, j) => bits !== v[j]);
        if (i >= 0) throw new Error(`pass ${k}: element ${i} differs between runs (${r[i]} vs ${b[k]![i]})`);
      });
      e.release(pr.tx, pr.tw, pr.tdy);
    },
  },
  {
    name: 'bad shapes and params are rejected with bad-shape errors',
    async run(e) {
      const pr = upload(e, small, makeRng(5));
      const out = e.empty(pr.oshape);
      const wrong = e.empty([2, 6, 4, 5]);
      expectVtError('bad-shape', () => e.conv2dForward(pr.tx, pr.tw, wrong, small.p), 'wrong out shape');
      expectVtError('bad-shape', () => e.conv2dForward(pr.tx, pr.tw, out, { stride: 0, pad: 1 }), 'stride 0');
      expectVtError('bad-shape', () => e.conv2dForward(pr.tx, pr.tw, out, { stride: 1, pad: -1 }), 'negative pad');
      expectVtError('bad-shape', () => normalizeConv2d([2, 4, 9, 7], small.w, small.p), 'channel mismatch');
      expectVtError('bad-shape', () => normalizeConv2d([2, 5, 2, 2], small.w, { stride: 1, pad: 0 }), 'kernel larger than input');
      expectVtError('bad-shape', () => normalizeConv2d(small.x, small.w, { stride: 1 } as unknown as Conv2dParams), 'pad missing (an untyped caller)');
      expectVtError('bad-shape', () => e.conv2dBackwardFilter(pr.tx, out, wrong, small.p), 'dw shape');
      e.release(pr.tx, pr.tw, pr.tdy, out, wrong);
    },
  },
  {
    name: 'batch split into binding-sized chunks at aligned sample counts (planning)',
    gpuOnly: true,
    async run() {
      const limits = { maxStorageBufferBindingSize: 1 << 20, minStorageBufferOffsetAlignment: 256 };
      const plan = (x: Shape4, w: Shape4) => JSON.stringify(conv2dBatchChunks(limits, normalizeConv2d(x, w, { stride: 1, pad: 0 }), 'test'));
      // 64 KiB per sample in and out: 16 samples per MiB binding.
      const a = plan([40, 16, 32, 32], [16, 16, 1, 1]);
      if (a !== '[[0,16],[16,16],[32,8]]') throw new Error(`plan ${a}`);
      // 3*9*9*4 = 972 bytes per sample: only multiples of 64 samples start 256-byte aligned.
      const b = plan([2000, 3, 9, 9], [3, 3, 1, 1]);
      if (b !== '[[0,1024],[1024,976]]') throw new Error(`plan ${b}`);
      expectVtError('too-large', () => plan([2, 300, 40, 40], [1, 300, 1, 1]), 'sample larger than a binding');
    },
  },
  {
    name: 'batch larger than one storage binding (1x1 stride 2 conv, exact integer data)',
    gpuOnly: true,
    async run(e) {
      const gpu = e.gpu;
      // Only where the binding limit is small enough to exceed cheaply (128 MiB on llvmpipe).
      if (gpu.limits.maxStorageBufferBindingSize > 256 * 2 ** 20) return;
      // Two images of ~0.55 of the limit (side a multiple of 64 keeps samples 256-byte aligned);
      // stride 2 keeps dy and out small, so little data crosses to and from the GPU.
      const side = 64 * Math.ceil(Math.sqrt((0.55 * gpu.limits.maxStorageBufferBindingSize) / 4) / 64);
      const half = side / 2;
      const g: Geometry = { x: [2, 1, side, side], w: [1, 1, 1, 1], p: { stride: 2, pad: 0 } };
      const oshape = [2, 1, half, half];
      if (conv2dBatchChunks(gpu.limits, normalizeConv2d(g.x, g.w, g.p), 'test').length < 2) throw new Error('the test shape does not need splitting');
      // Values in {-1, 0, 1} and w = 2: every product and every partial sum is exact in float32.
      const rng = makeRng(6);
      const x = new Float32Array(prod(g.x)).map(() => rng.int(3) - 1), dy = new Float32Array(prod(oshape)).map(() => rng.int(3) - 1);
      const tx = gpu.upload(x, g.x), tdy = gpu.upload(dy, oshape), tw = gpu.upload(new Float32Array([2]), g.w);
      const out = gpu.empty(oshape), dx = gpu.empty(g.x), dw = gpu.empty(g.w);
      e.conv2dForward(tx, tw, out, g.p);
      e.conv2dBackwardInput(tdy, tw, dx, g.p);
      e.conv2dBackwardFilter(tx, tdy, dw, g.p);
      const ro = await gpu.readF32(out), rdw = await gpu.readF32(dw);
      let s = 0;
      for (let o = 0; o < dy.length; o++) {
        const xi = Math.floor(o / (half * half)) * side * side + 2 * Math.floor((o % (half * half)) / half) * side + 2 * (o % half);
        if (ro[o] !== 2 * x[xi]!) throw new Error(`out[${o}] = ${ro[o]}, want ${2 * x[xi]!}`);
        s += x[xi]! * dy[o]!;
      }
      if (rdw[0] !== s) throw new Error(`dw ${rdw[0]}, want ${s}`);
      gpu.release(out);
      const rdx = await gpu.readF32(dx);
      for (let i = 0; i < x.length; i++) {
        const y = Math.floor((i % (side * side)) / side), c = i % side;
        const want = y % 2 === 0 && c % 2 === 0 ? 2 * dy[Math.floor(i / (side * side)) * half * half + (y / 2) * half + c / 2]! : 0;
        if (rdx[i] !== want) throw new Error(`dx[${i}] = ${rdx[i]}, want ${want}`);
      }
      gpu.release(tx, tdy, tw, dx, dw);
    },
  },
];

export const suite: OpSuite = { op: 'conv2d', cases: [...shapeCases, ...otherCases] };
