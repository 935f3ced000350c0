// The threaded wasm engine: every op's result with 2 and 3 threads is bitwise equal to 1 thread
// on awkward shapes (odd sizes, batch 1 and 3, strides 2, accumulate; both ways of splitting
// conv2d: by image groups, and by GEMM rows when there are fewer groups than threads; batch norm
// and the bias gradient by channels, the bias add by samples), a whole
// model's forward + backward gradient is bitwise equal, destroy() ends the workers (a child
// process exits by itself), and bad thread counts are refused with a clear error.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Conv2dParams } from '../../src/shapes/conv2d.ts';
import { conv2dShape } from '../../src/shapes/conv2d.ts';
import { Model } from '../../src/nn/model.ts';
import { resnet20, smallCnn } from '../../src/nn/models.ts';
import type { ModelSpec } from '../../src/nn/graph.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { recordGradients, uploadBatch } from '../../src/train/step.ts';
import { WasmEngine, type WasmTensor } from '../../src/wasm/engine.ts';
import { MIN_SPLIT_MACS, splitRange } from '../../src/wasm/split.ts';
import { CMD_ARGS, CMD_WORDS, CommandList } from '../../src/wasm/threads.ts';

const COUNTS = [1, 2, 3] as const;
let engines: WasmEngine[] = [];
beforeAll(async () => {
  engines = await Promise.all(COUNTS.map((threads) => WasmEngine.create({ threads, initialMiB: 16 })));
});
afterAll(() => { for (const e of engines) e.destroy(); });

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
const bits = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length);

/** Runs `op` on every engine with the same inputs (and initial output); the outputs' bits per engine. */
async function onAll(inputs: { shape: number[]; data: Float32Array }[], outShape: number[], outInit: Float32Array,
  op: (e: WasmEngine, ts: WasmTensor[], out: WasmTensor) => void): Promise<Uint32Array[]> {
  const res: Uint32Array[] = [];
  for (const e of engines) {
    const ts = inputs.map((i) => e.upload(i.data, i.shape));
    const out = e.upload(outInit, outShape);
    op(e, ts, out);
    res.push(bits(await e.readF32(out)));
    e.release(...ts, out);
  }
  return res;
}

function expectSame(res: Uint32Array[]): void {
  for (let i = 1; i < res.length; i++) {
    const r = res[i]!, r0 = res[0]!;
    let first = -1;
    for (let j = 0; j < r0.length && first < 0; j++) if (r[j] !== r0[j]) first = j;
    expect(first, `${COUNTS[i]} threads differ from 1 thread first at element ${first} of ${r0.length}`).toBe(-1);
  }
}

it('describes its threads; splitRange covers [0, total) in aligned pieces', () => {
  expect(engines.map((e) => e.info.description)).toEqual(
    ['WebAssembly SIMD with FMA, 1 thread', 'WebAssembly SIMD with FMA, 2 threads', 'WebAssembly SIMD with FMA, 3 threads'],
  );
  expect(engines.map((e) => e.threads)).toEqual([1, 2, 3]);
  expect([0, 1, 2].map((t) => splitRange(10, 3, t, 4))).toEqual([[0, 4], [4, 8], [8, 10]]);
  expect([0, 1, 2].map((t) => splitRange(2, 3, t))).toEqual([[0, 0], [0, 1], [1, 2]]);
});

describe('gemm: bitwise equal for 1, 2, 3 threads', () => {
  interface S { M: number; N: number; K: number; transA?: boolean; transB?: boolean; alpha?: number; beta?: number; batch?: number }
  const shapes: S[] = [
    { M: 67, N: 45, K: 131 },
    { M: 130, N: 33, K: 257, transA: true, beta: 1 },
    { M: 61, N: 75, K: 99, transB: true, alpha: 0.5 }, // the dot-product kernel
    { M: 37, N: 29, K: 300, transA: true, transB: true, beta: -0.75 },
    { M: 13, N: 11, K: 300, beta: 0.5 }, // 4 row blocks of 4 for 3 threads
    { M: 9, N: 257, K: 300, beta: 0.5 }, // wider than tall: columns split in panels of 8, the last part's ending in a 1-column edge
    { M: 33, N: 150, K: 64, transA: true, beta: 1 }, // a linear layer's weight gradient, by columns
    { M: 6, N: 300, K: 160, transA: true, transB: true, alpha: -1.5 }, // by columns, B stored transposed
    { M: 5, N: 9, K: 6000, transB: true, beta: 1 }, // the dot-product kernel by columns: 2 panels, so 2 parts for 3 threads
    { M: 21, N: 40, K: 120, batch: 3, transB: true, beta: 1 }, // split by batch
    { M: 45, N: 38, K: 77, batch: 2 }, // batch < 3 threads: split by rows
  ];
  for (const s of shapes) {
    it(JSON.stringify(s), async () => {
      const rng = makeRng(s.M * 31 + s.N);
      const batch = s.batch ?? 1;
      const aShape = s.transA ? [s.K, s.M] : [s.M, s.K], bShape = s.transB ? [s.N, s.K] : [s.K, s.N];
      const a = { shape: batch > 1 ? [batch, ...aShape] : aShape, data: uniformF32(rng, batch * s.M * s.K) };
      const b = { shape: batch > 1 ? [batch, ...bShape] : bShape, data: uniformF32(rng, batch * s.K * s.N) };
      const cShape = batch > 1 ? [batch, s.M, s.N] : [s.M, s.N];
      const res = await onAll([a, b], cShape, uniformF32(rng, prod(cShape)), (e, [ta, tb], c) =>
        e.gemm(ta!, tb!, c, { transA: s.transA, transB: s.transB, alpha: s.alpha, beta: s.beta }));
      expectSame(res);
    });
  }
});

describe('conv2d: bitwise equal for 1, 2, 3 threads', () => {
  interface C { n: number; cin: number; h: number; w: number; cout: number; k: number; p: Conv2dParams; accumulate?: boolean }
  const cases: C[] = [
    { n: 1, cin: 5, h: 27, w: 29, cout: 13, k: 3, p: { stride: 1, pad: 1 } }, // one group: rows split
    { n: 3, cin: 12, h: 25, w: 23, cout: 9, k: 3, p: { stride: 2, pad: 1 }, accumulate: true }, // stride 2, one group of 3
    { n: 3, cin: 3, h: 33, w: 33, cout: 8, k: 3, p: { stride: 1, pad: 1 } }, // S > 1024: one image per group, split by groups
    { n: 5, cin: 6, h: 11, w: 9, cout: 13, k: 5, p: { stride: 2, pad: 2 }, accumulate: true },
    { n: 3, cin: 24, h: 37, w: 35, cout: 10, k: 1, p: { stride: 1, pad: 0 } }, // pointwise, direct paths
    { n: 1, cin: 40, h: 33, w: 35, cout: 6, k: 1, p: { stride: 1, pad: 0 }, accumulate: true }, // pointwise, one image
    { n: 7, cin: 16, h: 8, w: 8, cout: 16, k: 3, p: { stride: 1, pad: 1 } }, // ResNet's small maps: 7 images in one group
    { n: 9, cin: 4, h: 16, w: 16, cout: 8, k: 3, p: { stride: 1, pad: 1 }, accumulate: true }, // groups of 4, 4, 1
    // Pointwise on several images a group (gemmSeg): groups of 4, 4, 2 split by threads; one group of 16 split by rows.
    { n: 10, cin: 20, h: 16, w: 16, cout: 12, k: 1, p: { stride: 1, pad: 0 }, accumulate: true },
    { n: 16, cin: 64, h: 4, w: 4, cout: 36, k: 1, p: { stride: 1, pad: 0 } },
  ];
  for (const c of cases) {
    const xShape = [c.n, c.cin, c.h, c.w], wShape = [c.cout, c.cin, c.k, c.k];
    const yShape = conv2dShape(xShape, wShape, c.p);
    const name = `x ${xShape.join('x')} w ${wShape.join('x')} ${JSON.stringify(c.p)}${c.accumulate ? ' accumulate' : ''}`;
    it(`${name}: forward, backward input, backward filter`, async () => {
      expect(c.n * c.cout * c.cin * c.k * c.k * prod(yShape.slice(2)), 'big enough to be split').toBeGreaterThanOrEqual(MIN_SPLIT_MACS);
      const rng = makeRng(c.n * 7 + c.cin);
      const x = { shape: xShape, data: uniformF32(rng, prod(xShape)) };
      const w = { shape: wShape, data: uniformF32(rng, prod(wShape)) };
      const dy = { shape: yShape, data: uniformF32(rng, prod(yShape)) };
      const o = { accumulate: c.accumulate };
      expectSame(await onAll([x, w], yShape, uniformF32(rng, prod(yShape)), (e, [tx, tw], y) => e.conv2dForward(tx!, tw!, y, c.p)));
      expectSame(await onAll([dy, w], xShape, uniformF32(rng, prod(xShape)), (e, [tdy, tw], dx) => e.conv2dBackwardInput(tdy!, tw!, dx, c.p, o)));
      expectSame(await onAll([x, dy], wShape, uniformF32(rng, prod(wShape)), (e, [tx, tdy], dw) => e.conv2dBackwardFilter(tx!, tdy!, dw, c.p, o)));
    });
  }
});

describe('pooling, relu, add: bitwise equal for 1, 2, 3 threads (split by planes or elements)', () => {
  const xShape = [3, 7, 67, 65], n = prod(xShape);
  const pool = { kernel: [3, 2] as [number, number], stride: 2, pad: [1, 0] as [number, number] };
  const oShape = [3, 7, 34, 32];
  const x = () => ({ shape: xShape, data: uniformF32(makeRng(21), n) });
  const o = () => ({ shape: oShape, data: uniformF32(makeRng(22), prod(oShape)) });
  it('max and average pooling, forward and backward', async () => {
    expectSame(await onAll([x()], oShape, new Float32Array(prod(oShape)), (e, [tx], y) => {
      const a = e.zeros(oShape, 'u32');
      e.maxPoolForward(tx!, y, a, pool);
      e.release(a);
    }));
    const argmax = await (async () => {
      const e = engines[0]!;
      const tx = e.upload(x().data, xShape), y = e.zeros(oShape), a = e.zeros(oShape, 'u32');
      e.maxPoolForward(tx, y, a, pool);
      const r = await e.read(a);
      e.release(tx, y, a);
      return r;
    })();
    expectSame(await onAll([o()], xShape, uniformF32(makeRng(3), n), (e, [dy], dx) => {
      const a = e.upload(argmax as Uint32Array, oShape);
      e.maxPoolBackward(dy!, a, dx, pool);
      e.release(a);
    }));
    expectSame(await onAll([x()], oShape, new Float32Array(prod(oShape)), (e, [tx], y) => e.avgPoolForward(tx!, y, pool)));
    expectSame(await onAll([o()], xShape, uniformF32(makeRng(3), n), (e, [dy], dx) => e.avgPoolBackward(dy!, dx, pool)));
  });
  it('relu forward and backward, add, addInPlace (odd sizes)', async () => {
    const y = { shape: xShape, data: uniformF32(makeRng(23), n) };
    expectSame(await onAll([x()], xShape, new Float32Array(n), (e, [tx], out) => e.reluForward(tx!, out)));
    expectSame(await onAll([x(), y], xShape, new Float32Array(n), (e, [tx, dy], out) => e.reluBackward(tx!, dy!, out)));
    expectSame(await onAll([x(), y], xShape, new Float32Array(n), (e, [a, b], out) => e.add(a!, b!, out)));
    expectSame(await onAll([y], xShape, uniformF32(makeRng(24), n), (e, [b], out) => e.addInPlace(out, b!)));
  });
});

describe('bias: bitwise equal for 1, 2, 3 threads (add split by samples, backward by channels; fused with ReLU too)', () => {
  for (const shape of [[3, 7, 61, 59], [300, 257]]) {
    it(`add in place and backward with accumulate on [${shape}]`, async () => {
      const n = prod(shape), c = shape[1]!, rng = makeRng(41);
      const bias = { shape: [c], data: uniformF32(rng, c) }, dy = { shape, data: uniformF32(rng, n) };
      expectSame(await onAll([bias], shape, uniformF32(rng, n), (e, [b], out) => e.biasAddInPlace(out, b!)));
      expectSame(await onAll([dy], [c], uniformF32(rng, c), (e, [g], out) => e.biasBackward(g!, out, { accumulate: true })));
      // Fused with the ReLU after it: y = max(x + b, 0), then dx and db (db accumulated) from y and dy.
      const x = { shape, data: uniformF32(rng, n) };
      expectSame(await onAll([x, bias], shape, new Float32Array(n), (e, [t, b], out) => e.biasRelu(t!, b!, out)));
      const dbInit = uniformF32(rng, c);
      for (const want of ['dx', 'db'] as const) {
        expectSame(await onAll([x, dy], want === 'dx' ? shape : [c], want === 'dx' ? new Float32Array(n) : dbInit, (e, [t, g], out) => {
          const dx = want === 'dx' ? out : e.empty(shape), db = want === 'db' ? out : e.upload(dbInit);
          e.reluBiasBackward(t!, g!, dx, db, { accumulate: true });
          if (want === 'dx') e.release(db); else e.release(dx);
        }));
      }
    });
  }
});

describe('max pool + ReLU + bias backward fused: bitwise equal for 1, 2, 3 threads (planes split by samples, sums by channels)', () => {
  for (const [shape, pool] of [[[5, 7, 40, 36], { kernel: 2, stride: 2, pad: 0 }], [[4, 6, 41, 43], { kernel: 3, stride: 2, pad: 1 }]] as const) {
    it(`[${shape}] ${JSON.stringify(pool)}, dx and db (accumulated)`, async () => {
      const n = prod(shape), c = shape[1], rng = makeRng(43);
      const x = { shape: [...shape], data: uniformF32(rng, n) }, bias = { shape: [c], data: uniformF32(rng, c) }, dbInit = uniformF32(rng, c);
      const os = [shape[0], c, ...[shape[2], shape[3]].map((d) => Math.floor((d + 2 * pool.pad - pool.kernel) / pool.stride) + 1)];
      const dy = { shape: os, data: uniformF32(rng, prod(os)) };
      for (const want of ['dx', 'db'] as const) {
        expectSame(await onAll([x, bias, dy], want === 'dx' ? [...shape] : [c], want === 'dx' ? new Float32Array(n) : dbInit, (e, [t, b, g], out) => {
          const y = e.empty([...shape]), p = e.empty(os), a = e.empty(os, 'u32');
          e.biasRelu(t!, b!, y);
          e.maxPoolForward(y, p, a, pool);
          const dx = want === 'dx' ? out : e.empty([...shape]), db = want === 'db' ? out : e.upload(dbInit);
          e.poolReluBiasBackward(g!, a, y, dx, db, { ...pool, accumulate: true });
          e.release(y, p, a, want === 'dx' ? db : dx);
        }));
      }
    });
  }
});

describe('batch norm: bitwise equal for 1, 2, 3 threads (split by channels)', () => {
  it('training forward (statistics, running averages), inference, backward with accumulate, each also fused with a ReLU; 7 channels', async () => {
    const xShape = [3, 7, 61, 59], n = prod(xShape), c = xShape[1]!;
    const rng = makeRng(31);
    const x = uniformF32(rng, n), dy = uniformF32(rng, n), gamma = uniformF32(rng, c), beta = uniformF32(rng, c);
    const run = uniformF32(rng, c), runVar = Float32Array.from(uniformF32(rng, c), (v) => 1 + Math.abs(v)), init = uniformF32(rng, c);
    const outs: Uint32Array[][] = [];
    for (const e of engines) {
      const up = (d: Float32Array, s: number[]) => e.upload(d, s);
      const tx = up(x, xShape), tdy = up(dy, xShape), tg = up(gamma, [c]), tb = up(beta, [c]), rm = up(run, [c]), rv = up(runVar, [c]);
      const y = e.empty(xShape), yi = e.empty(xShape), dx = e.empty(xShape), mean = e.empty([c]), invstd = e.empty([c]);
      const dg = up(init, [c]), db = up(init, [c]);
      e.batchNormForward(tx, tg, tb, rm, rv, y, mean, invstd, { eps: 1e-5, momentum: 0.1 });
      e.batchNormInference(tx, tg, tb, rm, rv, yi, { eps: 1e-5 });
      e.batchNormBackward(tx, tdy, tg, mean, invstd, dx, dg, db, { accumulate: true });
      // Fused with a ReLU after it (the backward's gate recomputed from x).
      const yr = e.empty(xShape), yri = e.empty(xShape), dxr = e.empty(xShape), dgr = up(init, [c]), dbr = up(init, [c]);
      e.batchNormReluForward(tx, tg, tb, rm, rv, yr, mean, invstd, { eps: 1e-5, momentum: 0.1 });
      e.batchNormReluInference(tx, tg, tb, rm, rv, yri, { eps: 1e-5 });
      e.batchNormReluBackward(tx, tdy, tg, tb, mean, invstd, dxr, dgr, dbr, { accumulate: true });
      const all = [y, mean, invstd, rm, rv, yi, dx, dg, db, yr, yri, dxr, dgr, dbr];
      outs.push(await Promise.all(all.map(async (t) => bits(await e.readF32(t)))));
      e.release(tx, tdy, tg, tb, ...all);
    }
    for (let i = 0; i < outs[0]!.length; i++) expectSame(outs.map((o) => o[i]!));
  });
});

describe('a whole model: forward + backward bitwise equal for 1, 2, 3 threads', () => {
  const run = async (e: WasmEngine, spec: ModelSpec, batch: number, fuse = true): Promise<{ loss: Uint32Array; grads: Uint32Array }> => {
    const model = new Model(e, spec, { seed: 3, fuse });
    const rng = makeRng(11);
    const host = {
      x: uniformF32(rng, batch * 3 * 32 * 32), labels: Int32Array.from({ length: batch }, (_, i) => (i * 7) % 10), shape: [batch, 3, 32, 32] as const,
    };
    const x = uploadBatch(model, host, null);
    try {
      const total = recordGradients(model, x, 5);
      return { loss: bits(await e.readF32(total)), grads: bits(await e.readF32(model.grads)) };
    } finally {
      e.release(x);
      model.destroy();
    }
  };
  for (const [spec, batch] of [[smallCnn([3, 32, 32], 10), 6], [resnet20([3, 32, 32], 10), 3]] as const) {
    it(`${spec.name}, batch ${batch}`, async () => {
      const out = [];
      for (const e of engines) out.push(await run(e, spec, batch));
      expectSame(out.map((o) => o.loss));
      expectSame(out.map((o) => o.grads));
      expect(out[0]!.grads.some((b) => b !== 0)).toBe(true);
    });
  }
  it('the biases and BNs fused with their ReLUs (and a max pool after one) give the unfused bits (small CNN, ResNet-20; 1 and 2 threads)', async () => {
    for (const [spec, batch] of [[smallCnn([3, 32, 32], 10), 6], [resnet20([3, 32, 32], 10), 3]] as const) for (const e of engines.slice(0, 2)) {
      const [fused, plain] = [await run(e, spec, batch), await run(e, spec, batch, false)];
      const firstDiff = (a: Uint32Array, b: Uint32Array): number => a.findIndex((v, i) => v !== b[i]);
      expect(firstDiff(plain.loss, fused.loss), `${e.threads} thread(s): the loss differs`).toBe(-1);
      expect(firstDiff(plain.grads, fused.grads), `${e.threads} thread(s): the gradient differs first at this float`).toBe(-1);
    }
  });
});

describe('ops queued for the threads (batch, the default) and run as one job at a host access', () => {
  let single: WasmEngine[] = [];
  beforeAll(async () => {
    single = await Promise.all([2, 3].map((threads) => WasmEngine.create({ threads, initialMiB: 16, batch: false })));
  });
  afterAll(() => { for (const e of single) e.destroy(); });

  it('a whole model gives the bits of one job per op (2 and 3 threads)', async () => {
    for (const [spec, batch] of [[smallCnn([3, 32, 32], 10), 6], [resnet20([3, 32, 32], 10), 3]] as const) {
      for (const [i, e] of single.entries()) {
        expect(e.batch).toBe(false);
        const queued = engines[i + 1]!;
        expect(queued.batch).toBe(true);
        const grads = async (en: WasmEngine) => {
          const model = new Model(en, spec, { seed: 3 });
          const rng = makeRng(11);
          const x = uploadBatch(model, { x: uniformF32(rng, batch * 3 * 32 * 32), labels: Int32Array.from({ length: batch }, (_, k) => k % 10),
            shape: [batch, 3, 32, 32] }, null);
          recordGradients(model, x, 5);
          const g = bits(await en.readF32(model.grads));
          en.release(x);
          model.destroy();
          return g;
        };
        expectSame([await grads(e), await grads(queued)]);
      }
    }
  });

  it('copy and fill split between the threads; copy moves overlapping views of one tensor as memmove does', async () => {
    const n = 3 * (1 << 16) + 5; // past the elementwise split threshold, not a multiple of the parts
    const data = Float32Array.from({ length: n + 40 }, (_, i) => i + 0.5);
    for (const e of engines) {
      const src = e.upload(data.subarray(0, n)), dst = e.zeros([n]);
      e.copy(src, dst);
      expect(bits(await e.readF32(dst))).toEqual(bits(data.subarray(0, n)));
      // Views 7 and 19 floats apart within one tensor, both ways: the result is the source as it was before the copy.
      for (const [from, to] of [[19, 7], [7, 19]] as const) {
        const t = e.upload(data);
        e.copy(e.view(t, from, [n]), e.view(t, to, [n]));
        const want = data.slice();
        want.copyWithin(to, from, from + n);
        expect(bits(await e.readF32(t))).toEqual(bits(want));
        e.release(t);
      }
      e.fill(e.view(dst, 3, [n - 4]), -2.5); // split too: every float of the view, none outside it
      const filled = data.slice(0, n).fill(-2.5, 3, n - 1);
      expect(bits(await e.readF32(dst))).toEqual(bits(filled));
      e.release(src, dst);
    }
  });

  it('a copy, a write and zeros between queued ops see the ops before them, and the ops after see them', async () => {
    const rng = makeRng(21);
    const xShape = [4, 8, 24, 24], wShape = [8, 8, 3, 3], p = { stride: 1, pad: 1 }; // Winograd: its filter transform is queued too
    const x0 = uniformF32(rng, prod(xShape)), x1 = uniformF32(rng, prod(xShape)), w = uniformF32(rng, prod(wShape));
    const sequence = async (e: WasmEngine): Promise<Uint32Array[]> => {
      const tx = e.upload(x0, xShape), tw = e.upload(w, wShape);
      const y = e.empty(xShape), y2 = e.empty(xShape), y3 = e.empty(xShape), y4 = e.empty(xShape), dx = e.empty(xShape);
      e.conv2dForward(tx, tw, y, p); // queued: reads x0
      e.write(tx, x1); // after the conv read x0
      e.conv2dForward(tx, tw, y3, p);
      e.copy(y3, y4); // the conv ran first
      e.copy(y, y2);
      const gone = e.empty(xShape);
      e.conv2dBackwardInput(y3, tw, gone, p); // queued, into a tensor released before it ran
      e.release(gone);
      const z = e.zeros(xShape); // on that memory, most likely: zeros after the conv, not under it
      e.conv2dBackwardInput(y4, tw, dx, p);
      const out = [bits(await e.readF32(y2)), bits(await e.readF32(y4)), bits(await e.readF32(z)), bits(await e.readF32(dx))];
      e.release(tx, tw, y, y2, y3, y4, dx, z);
      return out;
    };
    const want = await sequence(engines[0]!);
    expect(want[0]!.some((b) => b !== 0) && want[3]!.some((b) => b !== 0) && want[2]!.every((b) => b === 0)).toBe(true);
    for (const e of [engines[1]!, engines[2]!]) {
      const got = await sequence(e);
      for (let k = 0; k < want.length; k++) expectSame([want[k]!, got[k]!]);
    }
  });
});

describe('thread counts and lifetime', () => {
  it('keeps working when the shared memory grows under the workers', async () => {
    const small = await WasmEngine.create({ threads: 2, initialMiB: 1 });
    try {
      const before = small.memoryStats().memoryBytes;
      const rng = makeRng(9);
      const xShape = [4, 6, 40, 40], wShape = [10, 6, 3, 3], p = { stride: 1, pad: 1 };
      const x = uniformF32(rng, prod(xShape)), w = uniformF32(rng, prod(wShape));
      const run = async (e: WasmEngine) => {
        const tx = e.upload(x, xShape), tw = e.upload(w, wShape), ty = e.zeros([4, 10, 40, 40]);
        e.conv2dForward(tx, tw, ty, p);
        const r = bits(await e.readF32(ty));
        e.release(tx, tw, ty);
        return r;
      };
      const got = await run(small);
      expect(small.memoryStats().memoryBytes).toBeGreaterThan(before);
      expectSame([await run(engines[0]!), got]);
    } finally {
      small.destroy();
    }
  });

  it('records commands at a fixed width, grows past its first buffer, and refuses a call with too many arguments', () => {
    const list = new CommandList();
    for (let i = 0; i < 100; i++) list.add(2, [i, 7, 8]);
    list.barrier();
    const c = list.commands;
    expect(c.length).toBe(101 * CMD_WORDS);
    expect([...c.subarray(99 * CMD_WORDS, 99 * CMD_WORDS + 6)]).toEqual([2, 3, 99, 7, 8, 0]);
    expect([...c.subarray(100 * CMD_WORDS)]).toEqual([-1, 0, ...new Array<number>(CMD_ARGS).fill(0)]);
    list.reset();
    list.add(3, new Array<number>(CMD_ARGS).fill(5));
    expect(list.commands.length).toBe(CMD_WORDS);
    expect(() => list.add(4, new Array<number>(CMD_ARGS + 1).fill(1))).toThrow(/im2col takes 17 arguments, a command has room for 16/);
  });

  it('refuses bad thread counts clearly', async () => {
    for (const threads of [0, -1, 1.5, Number.NaN, 65]) {
      await expect(WasmEngine.create({ threads })).rejects.toThrow(/threads must be an integer from 1 to 64/);
    }
  });

  it('destroy() ends the workers: the process exits by itself; the engine refuses work afterwards', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [
        '--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'test/wasm/threads-exit.ts',
      ], { timeout: 60_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(stdout);
      });
    });
    expect(out.trim()).toBe('ok WebAssembly SIMD with FMA, 2 threads');
    const e = await WasmEngine.create({ threads: 2, initialMiB: 1 });
    const t = e.zeros([2, 2]);
    e.destroy();
    expect(() => e.gemm(t, t, t)).toThrow(/destroyed/);
  });
});

describe("pointwise convolutions on several images: gemmSeg gives the copying path's bits", () => {
  // Maps of 16 and 24 pixels (panel pairs within and across images), a group split by rows (16 images of 4x4 at 2
  // threads) and groups split by threads (10 images of 16x16 in groups of 4), Cin 300 (two blocks of the reduction).
  // 2x2 maps (4 pixels, not a multiple of 8): every pass copies.
  const cases = [[10, 20, 16, 16, 12], [16, 64, 4, 4, 36], [5, 300, 3, 8, 11], [12, 9, 2, 2, 7]] as const;
  for (const [n, cin, h, w, cout] of cases) for (const threads of [1, 2]) {
    it(`x ${n}x${cin}x${h}x${w}, Cout ${cout}, ${threads} thread(s): forward, input and filter gradients, with and without accumulate`, async () => {
      const p = { stride: 1, pad: 0 };
      const xShape = [n, cin, h, w], wShape = [cout, cin, 1, 1], yShape = [n, cout, h, w];
      const rng = makeRng(n * cin + cout);
      const x = uniformF32(rng, prod(xShape)), wt = uniformF32(rng, prod(wShape)), dy = uniformF32(rng, prod(yShape));
      const dx0 = uniformF32(rng, prod(xShape)), dw0 = uniformF32(rng, prod(wShape));
      const run = async (pointwise: 'segments' | 'copy'): Promise<Uint32Array[]> => {
        const e = await WasmEngine.create({ threads, pointwise, initialMiB: 16 });
        try {
          const tx = e.upload(x, xShape), tw = e.upload(wt, wShape), tdy = e.upload(dy, yShape);
          const y = e.zeros(yShape), dx = e.zeros(xShape), dxAcc = e.upload(dx0, xShape);
          e.conv2dForward(tx, tw, y, p);
          e.conv2dBackwardInput(tdy, tw, dx, p);
          e.conv2dBackwardInput(tdy, tw, dxAcc, p, { accumulate: true });
          const dw = e.zeros(wShape), dwAcc = e.upload(dw0, wShape);
          e.conv2dBackwardFilter(tx, tdy, dw, p);
          e.conv2dBackwardFilter(tx, tdy, dwAcc, p, { accumulate: true });
          const out: Uint32Array[] = [];
          for (const t of [y, dx, dxAcc, dw, dwAcc]) out.push(bits(await e.readF32(t)));
          return out;
        } finally {
          e.destroy();
        }
      };
      const [seg, copy] = [await run('segments'), await run('copy')];
      for (const [i, what] of ['y', 'dx', 'dx accumulated', 'dw', 'dw accumulated'].entries()) {
        expect(Buffer.from(seg[i]!.buffer).equals(Buffer.from(copy[i]!.buffer)), `${what}: segments against copies`).toBe(true);
      }
    });
  }
});
