// Every op besides GEMM and conv2d on the wasm kernels, with the shapes, checks and semantics
// of the matching src/ops file (bias, relu, eltwise, pool, batchnorm, lrn, dropout,
// softmax_xent, topk). Each function: validate with src/ops' shape function, then one kernel call,
// or, for big pooling and relu / add calls on a threaded engine, one per thread on disjoint
// planes or element ranges (each element computed as with one thread: bitwise the same).
import { check } from '../errors.ts';
import { shapeStr } from '../shapes/shape.ts';
import { type BatchNormBackwardParams, type BatchNormParams, checkBatchNormOperands } from '../shapes/batchnorm.ts';
import { type BiasBackwardParams, biasDims } from '../shapes/bias.ts';
import { type DropoutParams, dropoutScale, dropoutShape, dropoutThreshold } from '../shapes/dropout.ts';
import { eltwiseSize } from '../shapes/eltwise.ts';
import { type LrnParams, lrnDims } from '../shapes/lrn.ts';
import { type Pool2dParams, type PoolGeometry, globalPoolParams, normalizePool2d } from '../shapes/pool.ts';
import { type SoftmaxXentParams, smoothingOf, softmaxXentDims } from '../shapes/softmax_xent.ts';
import { type TopkParams, topkDims } from '../shapes/topk.ts';
import type { Kernels } from './kernels.ts';
import { splitRange } from './split.ts';
import type { WasmCtx, WasmTensor } from './tensor.ts';

/** Below this many elements touched, an elementwise or pooling op stays on one thread. */
const MIN_SPLIT_ELEMS = 1 << 16;

/** Runs run(k, lo, hi) over disjoint ranges of [0, units) (aligned to `align`), one per thread. */
function split(cx: WasmCtx, units: number, elems: number, align: number, run: (k: Kernels, lo: number, hi: number) => void): void {
  const parts = elems < MIN_SPLIT_ELEMS ? 1 : Math.max(1, Math.min(cx.threads, Math.ceil(units / align)));
  cx.run(parts, (pc, t) => {
    const blocks = Math.ceil(units / align);
    const at = (i: number) => Math.min(units, Math.floor((blocks * i) / parts) * align);
    if (at(t + 1) > at(t)) run(pc.k, at(t), at(t + 1));
  });
}

const f32bits = new Uint32Array(new Float32Array([0]).buffer);
const f32view = new Float32Array(f32bits.buffer);

/** The bits of Math.fround(v): what WGSL stores for an f32 uniform. */
function bitsOf(v: number): number {
  f32view[0] = v;
  return f32bits[0]!;
}

// ---- bias, relu, eltwise -------------------------------------------------------------------

function checkBias(what: string, x: WasmTensor, b: WasmTensor): { n: number; c: number; hw: number } {
  const d = biasDims(x.shape);
  check(b.size === d.c, what, () => `bias has ${b.size} values for ${d.c} channels of x ${shapeStr(x.shape)}`);
  return d;
}

// x [N, C, H, W] or [N, F] (updated in place), b [C]
export function biasAddInPlace(cx: WasmCtx, x: WasmTensor, b: WasmTensor): void {
  const d = checkBias('biasAddInPlace', x, b);
  const px = cx.ptr(x, 'biasAddInPlace'), pb = cx.ptr(b, 'biasAddInPlace'), per = d.c * d.hw;
  split(cx, d.n, d.n * per, 1, (k, s0, s1) => k.biasAddInPlace(px + s0 * per * 4, pb, s1 - s0, d.c, d.hw));
}

// dy [N, C, H, W] or [N, F] -> db [C] (= or += by params.accumulate)
export function biasBackward(cx: WasmCtx, dy: WasmTensor, db: WasmTensor, params: BiasBackwardParams): void {
  const d = checkBias('biasBackward', dy, db);
  const pdy = cx.ptr(dy, 'biasBackward'), pdb = cx.ptr(db, 'biasBackward'), acc = params.accumulate ? 1 : 0;
  split(cx, d.c, d.n * d.c * d.hw, 1, (k, c0, c1) => k.biasBackward(pdy, pdb, d.n, d.c, d.hw, acc, c0, c1));
}

function checkRelu(what: string, x: WasmTensor, out: WasmTensor, dy: WasmTensor | null): void {
  check(out.size === x.size && (!dy || dy.size === x.size), what, () => `sizes differ: x ${x.size}, out ${out.size}${dy ? `, dy ${dy.size}` : ''}`);
}

export function reluForward(cx: WasmCtx, x: WasmTensor, y: WasmTensor): void {
  checkRelu('relu.forward', x, y, null);
  const px = cx.ptr(x, 'relu.forward'), py = cx.ptr(y, 'relu.forward');
  split(cx, x.size, x.size, 16, (k, lo, hi) => k.reluForward(px + lo * 4, py + lo * 4, hi - lo));
}

export function reluBackward(cx: WasmCtx, x: WasmTensor, dy: WasmTensor, dx: WasmTensor): void {
  const what = 'relu.backward';
  checkRelu(what, x, dx, dy);
  const px = cx.ptr(x, what), pdy = cx.ptr(dy, what), pdx = cx.ptr(dx, what);
  split(cx, x.size, x.size, 16, (k, lo, hi) => k.reluBackward(px + lo * 4, pdy + lo * 4, pdx + lo * 4, hi - lo));
}

// x [N, C, H, W] or [N, F], b [C] -> y = max(x + b, 0) (x unchanged): biasAddInPlace then reluForward, one pass
export function biasRelu(cx: WasmCtx, x: WasmTensor, b: WasmTensor, y: WasmTensor): void {
  const what = 'biasRelu';
  const d = checkBias(what, x, b);
  checkRelu(what, x, y, null);
  const px = cx.ptr(x, what), pb = cx.ptr(b, what), py = cx.ptr(y, what), per = d.c * d.hw;
  split(cx, d.n, 2 * d.n * per, 1, (k, s0, s1) => k.biasRelu(px + s0 * per * 4, pb, py + s0 * per * 4, s1 - s0, d.c, d.hw));
}

// y (biasRelu's output), dy -> dx = y > 0 ? dy : 0, db [C] (= or += by params.accumulate) the sums of dx: one pass
export function reluBiasBackward(cx: WasmCtx, y: WasmTensor, dy: WasmTensor, dx: WasmTensor, db: WasmTensor, params: BiasBackwardParams): void {
  const what = 'reluBiasBackward';
  const d = checkBias(what, y, db);
  checkRelu(what, y, dx, dy);
  const py = cx.ptr(y, what), pdy = cx.ptr(dy, what), pdx = cx.ptr(dx, what), pdb = cx.ptr(db, what), acc = params.accumulate ? 1 : 0;
  split(cx, d.c, 3 * d.n * d.c * d.hw, 1, (k, c0, c1) => k.reluBiasBackward(py, pdy, pdx, pdb, d.n, d.c, d.hw, acc, c0, c1));
}

// x, y, z [any, same size]: z = x + y
export function add(cx: WasmCtx, x: WasmTensor, y: WasmTensor, z: WasmTensor): void {
  const n = eltwiseSize(z.size, x.size, y.size);
  const px = cx.ptr(x, 'add'), py = cx.ptr(y, 'add'), pz = cx.ptr(z, 'add');
  split(cx, n, n, 16, (k, lo, hi) => k.add(px + lo * 4, py + lo * 4, pz + lo * 4, hi - lo));
}

// x, y [any, same size]: x += y
export function addInPlace(cx: WasmCtx, x: WasmTensor, y: WasmTensor): void {
  const n = eltwiseSize(x.size, y.size);
  const px = cx.ptr(x, 'addInPlace'), py = cx.ptr(y, 'addInPlace');
  split(cx, n, n, 16, (k, lo, hi) => k.add(px + lo * 4, py + lo * 4, px + lo * 4, hi - lo));
}

// dst = src (any dtype, the same size): a queued op split between the threads like add's, where copying on the calling thread
// first ran every queued op and left the other threads idle (an identity block's residual add copies dy in the backward).
// Overlapping ranges (views of one block) are copied whole, in one part, as memmove does.
export function copy(cx: WasmCtx, src: WasmTensor, dst: WasmTensor): void {
  check(src.size === dst.size, 'copy', () => `${src.size} elements into ${dst.size}`);
  const ps = cx.ptr(src, 'copy'), pd = cx.ptr(dst, 'copy'), n = src.size;
  if (n === 0 || ps === pd) return;
  if (ps + n * 4 > pd && pd + n * 4 > ps) cx.run(1, (pc) => pc.k.copyRows(ps, 0, pd, 0, 1, n));
  else split(cx, n, n, 16, (k, lo, hi) => k.copyRows(ps + lo * 4, 0, pd + lo * 4, 0, 1, hi - lo));
}

// x [any]: x = value as an f32 (its bits, whatever x's dtype: as the WGSL fill); queued and split as copy (zeroGrads each step)
export function fill(cx: WasmCtx, x: WasmTensor, value: number): void {
  const px = cx.ptr(x, 'fill'), b = bitsOf(value);
  split(cx, x.size, x.size, 16, (k, lo, hi) => k.fill(px + lo * 4, b, hi - lo));
}

// ---- pooling ---------------------------------------------------------------------------------

function checkT(t: WasmTensor, shape: readonly number[], dtype: WasmTensor['dtype'], what: string, name: string): void {
  check(t.size === shape.reduce((a, b) => a * b, 1) && t.dtype === dtype, what,
    () => `${name} must be ${dtype} ${shapeStr(shape)}, got ${t.dtype} ${shapeStr(t.shape)}`);
}

function checkMax(xShape: readonly number[], out: WasmTensor, argmax: WasmTensor, params: Pool2dParams, what: string, name: string): PoolGeometry {
  const g = normalizePool2d(xShape, params, what);
  const oshape = [g.n, g.c, g.oh, g.ow];
  checkT(out, oshape, 'f32', what, name);
  checkT(argmax, oshape, 'u32', what, 'argmax');
  return g;
}

const windowArgs = (g: PoolGeometry): [number, number, number, number, number, number] => [g.kh, g.kw, g.sh, g.sw, g.ph, g.pw];

// x [N, C, H, W] -> y f32 [N, C, OH, OW], argmax u32 (iy*W + ix in the plane)
export function maxPoolForward(cx: WasmCtx, x: WasmTensor, y: WasmTensor, argmax: WasmTensor, params: Pool2dParams): void {
  const what = 'maxPool.forward';
  const g = checkMax(x.shape, y, argmax, params, what, 'y');
  const px = cx.ptr(x, what), py = cx.ptr(y, what), pa = cx.ptr(argmax, what);
  const [hw, ohw] = [g.h * g.w, g.oh * g.ow];
  split(cx, g.n * g.c, g.n * g.c * ohw * g.kh * g.kw, 1, (k, lo, hi) =>
    k.maxPoolForward(px + lo * hw * 4, py + lo * ohw * 4, pa + lo * ohw * 4, hi - lo, g.h, g.w, g.oh, g.ow, ...windowArgs(g)));
}

// dy [N, C, OH, OW], argmax -> dx [N, C, H, W] (written)
export function maxPoolBackward(cx: WasmCtx, dy: WasmTensor, argmax: WasmTensor, dx: WasmTensor, params: Pool2dParams): void {
  const what = 'maxPool.backward';
  const g = checkMax(dx.shape, dy, argmax, params, what, 'dy');
  const pdy = cx.ptr(dy, what), pa = cx.ptr(argmax, what), pdx = cx.ptr(dx, what);
  const [hw, ohw] = [g.h * g.w, g.oh * g.ow];
  split(cx, g.n * g.c, g.n * g.c * (hw + ohw), 1, (k, lo, hi) =>
    k.maxPoolBackward(pdy + lo * ohw * 4, pa + lo * ohw * 4, pdx + lo * hw * 4, hi - lo, g.h, g.w, g.oh, g.ow, twoByTwoOf(g)));
}

/** 1 for an unpadded 2x2 stride-2 pool (the kernels' window-by-window backward), else 0. */
const twoByTwoOf = (g: PoolGeometry): 0 | 1 => (g.kh === 2 && g.kw === 2 && g.sh === 2 && g.sw === 2 && g.ph === 0 && g.pw === 0 ? 1 : 0);

// dy [N, C, OH, OW], argmax, y [N, C, H, W] (a biasRelu's output, the pool's input) -> dx = y > 0 ? maxPool.backward(dy) : 0
// (written) and db [C] (= or += by params.accumulate) its sums: maxPoolBackward then reluBiasBackward. Planes in memory
// order split by samples, each plane's sum kept; after a barrier the sums added per channel (split by channels).
export function poolReluBiasBackward(cx: WasmCtx, dy: WasmTensor, argmax: WasmTensor, y: WasmTensor, dx: WasmTensor, db: WasmTensor,
  params: Pool2dParams & BiasBackwardParams): void {
  const what = 'poolReluBiasBackward';
  const g = checkMax(dx.shape, dy, argmax, params, what, 'dy');
  checkBias(what, dx, db);
  checkRelu(what, y, dx, null);
  const pdy = cx.ptr(dy, what), pa = cx.ptr(argmax, what), py = cx.ptr(y, what), pdx = cx.ptr(dx, what), pdb = cx.ptr(db, what);
  const [hw, ohw] = [g.h * g.w, g.oh * g.ow], acc = params.accumulate ? 1 : 0, twoByTwo = twoByTwoOf(g);
  const sums = cx.scratch('aux', g.n * g.c * 4);
  const parts = g.n * g.c * (2 * hw + ohw) < MIN_SPLIT_ELEMS ? 1 : Math.min(cx.threads, g.n);
  cx.run(parts, (pc, t) => {
    const [b0, b1] = splitRange(g.n, parts, t), p0 = b0 * g.c, planes = (b1 - b0) * g.c;
    const [o, q] = [p0 * ohw * 4, p0 * hw * 4];
    if (planes > 0) pc.k.poolReluBackward(pdy + o, pa + o, py + q, pdx + q, sums + p0 * 4, planes, g.h, g.w, g.oh, g.ow, twoByTwo);
    pc.barrier();
    const [c0, c1] = splitRange(g.c, parts, t);
    if (c1 > c0) pc.k.biasFromPlaneSums(sums, pdb, g.n, g.c, acc, c0, c1);
  });
}

export function avgPoolForward(cx: WasmCtx, x: WasmTensor, y: WasmTensor, params: Pool2dParams): void {
  const what = 'avgPool.forward';
  const g = normalizePool2d(x.shape, params, what);
  checkT(y, [g.n, g.c, g.oh, g.ow], 'f32', what, 'y');
  const px = cx.ptr(x, what), py = cx.ptr(y, what);
  const [hw, ohw] = [g.h * g.w, g.oh * g.ow];
  split(cx, g.n * g.c, g.n * g.c * ohw * g.kh * g.kw, 1, (k, lo, hi) =>
    k.avgPoolForward(px + lo * hw * 4, py + lo * ohw * 4, hi - lo, g.h, g.w, g.oh, g.ow, ...windowArgs(g)));
}

export function avgPoolBackward(cx: WasmCtx, dy: WasmTensor, dx: WasmTensor, params: Pool2dParams): void {
  const what = 'avgPool.backward';
  const g = normalizePool2d(dx.shape, params, what);
  checkT(dy, [g.n, g.c, g.oh, g.ow], 'f32', what, 'dy');
  const pdy = cx.ptr(dy, what), pdx = cx.ptr(dx, what);
  const [hw, ohw] = [g.h * g.w, g.oh * g.ow];
  split(cx, g.n * g.c, g.n * g.c * (hw + ohw * g.kh * g.kw), 1, (k, lo, hi) =>
    k.avgPoolBackward(pdy + lo * ohw * 4, pdx + lo * hw * 4, hi - lo, g.h, g.w, g.oh, g.ow, ...windowArgs(g)));
}

// x [N, C, H, W] -> y [N, C] (or [N, C, 1, 1])
export function globalAvgPoolForward(cx: WasmCtx, x: WasmTensor, y: WasmTensor): void {
  const what = 'avgPool.forward';
  const g = normalizePool2d(x.shape, globalPoolParams(x.shape), what);
  checkT(y, [g.n, g.c, 1, 1], 'f32', what, 'y');
  cx.k.globalAvgPoolForward(cx.ptr(x, what), cx.ptr(y, what), g.n * g.c, g.h * g.w);
}

// dy [N, C] -> dx [N, C, H, W] = dy / (H*W)
export function globalAvgPoolBackward(cx: WasmCtx, dy: WasmTensor, dx: WasmTensor): void {
  const what = 'avgPool.backward';
  const g = normalizePool2d(dx.shape, globalPoolParams(dx.shape), what);
  checkT(dy, [g.n, g.c, 1, 1], 'f32', what, 'dy');
  cx.k.globalAvgPoolBackward(cx.ptr(dy, what), cx.ptr(dx, what), g.n * g.c, g.h * g.w);
}

// ---- batch norm, LRN -------------------------------------------------------------------------

// x; gamma, beta, runningMean, runningVar (updated) [C] -> y, mean, invstd [C]; with relu, y = max(BN, 0) (the ReLU after it fused)
export function batchNormForward(cx: WasmCtx, x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, runningMean: WasmTensor, runningVar: WasmTensor,
  y: WasmTensor, mean: WasmTensor, invstd: WasmTensor, params: BatchNormParams, relu = false): void {
  const what = relu ? 'batchNormRelu.forward' : 'batchNorm.forward';
  const { n, c, hw } = checkBatchNormOperands(what, x, { y }, { gamma, beta, runningMean, runningVar, mean, invstd });
  const px = cx.ptr(x, what), pm = cx.ptr(mean, what), pi = cx.ptr(invstd, what), py = cx.ptr(y, what);
  const prm = cx.ptr(runningMean, what), prv = cx.ptr(runningVar, what), pg = cx.ptr(gamma, what), pb = cx.ptr(beta, what);
  const sums = cx.scratch('aux', n * c * 4);
  // Three passes over the planes in memory order (split by samples), the per-channel sums between them (by channels).
  bnPasses(cx, n, c, 3 * n * c * hw, (k, p0, planes, c0, c1, barrier) => {
    k.batchNormSums(px, p0, planes, c, hw, 0, sums, 0);
    barrier();
    k.batchNormMean(sums, n, c, hw, pm, c0, c1);
    barrier();
    k.batchNormSums(px, p0, planes, c, hw, pm, sums, 1);
    barrier();
    k.batchNormVar(sums, n, c, hw, pm, pi, prm, prv, params.eps, params.momentum, c0, c1);
    barrier();
    k.batchNormApply(px, py, p0, planes, c, hw, pg, pb, pm, pi, 0, 0, relu ? 1 : 0);
  });
}

/**
 * Runs a batch norm's passes as one op: each part gets planes [p0, p0 + planes) (whole samples, in memory order) and
 * channels [c0, c1) (an empty range does nothing in the kernels), and `barrier` between the passes.
 */
function bnPasses(cx: WasmCtx, n: number, c: number, elems: number,
  run: (k: Kernels, p0: number, planes: number, c0: number, c1: number, barrier: () => void) => void): void {
  const parts = elems < MIN_SPLIT_ELEMS ? 1 : Math.max(1, Math.min(cx.threads, n, c));
  cx.run(parts, (pc, t) => {
    const [b0, b1] = splitRange(n, parts, t), [c0, c1] = splitRange(c, parts, t);
    run(pc.k, b0 * c, (b1 - b0) * c, c0, c1, () => pc.barrier());
  });
}

export function batchNormInference(cx: WasmCtx, x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, runningMean: WasmTensor, runningVar: WasmTensor,
  y: WasmTensor, params: { eps: number }, relu = false): void {
  const what = relu ? 'batchNormRelu.inference' : 'batchNorm.inference';
  const { n, c, hw } = checkBatchNormOperands(what, x, { y }, { gamma, beta, runningMean, runningVar });
  const px = cx.ptr(x, what), py = cx.ptr(y, what), pg = cx.ptr(gamma, what), pb = cx.ptr(beta, what);
  const prm = cx.ptr(runningMean, what), prv = cx.ptr(runningVar, what);
  split(cx, n, n * c * hw, 1, (k, b0, b1) => k.batchNormApply(px, py, b0 * c, (b1 - b0) * c, c, hw, pg, pb, prm, prv, 1, params.eps, relu ? 1 : 0));
}

// With beta (not null), dy is the gradient of the ReLU fused after the BN: taken as 0 where the BN's output is not > 0.
export function batchNormBackward(cx: WasmCtx, x: WasmTensor, dy: WasmTensor, gamma: WasmTensor, mean: WasmTensor, invstd: WasmTensor,
  dx: WasmTensor, dgamma: WasmTensor, dbeta: WasmTensor, params: BatchNormBackwardParams, beta: WasmTensor | null = null): void {
  const what = beta ? 'batchNormRelu.backward' : 'batchNorm.backward';
  const { n, c, hw } = checkBatchNormOperands(what, x, { dy, dx }, { gamma, mean, invstd, dgamma, dbeta, ...(beta ? { beta } : {}) });
  const px = cx.ptr(x, what), pdy = cx.ptr(dy, what), pg = cx.ptr(gamma, what), pm = cx.ptr(mean, what), pi = cx.ptr(invstd, what);
  const pdx = cx.ptr(dx, what), pdg = cx.ptr(dgamma, what), pdb = cx.ptr(dbeta, what), acc = params.accumulate ? 1 : 0;
  const pbeta = beta ? cx.ptr(beta, what) : 0, relu = beta ? 1 : 0;
  const P = n * c, sums = cx.scratch('aux', 2 * P * 4), consts = cx.scratch('aux2', 3 * c * 4);
  bnPasses(cx, n, c, 4 * P * hw, (k, p0, planes, c0, c1, barrier) => {
    k.batchNormBackwardSums(px, pdy, p0, planes, P, c, hw, pg, pbeta, pm, pi, relu, sums);
    barrier();
    k.batchNormBackwardReduce(sums, n, c, hw, pg, pi, pdg, pdb, acc, c0, c1, consts);
    barrier();
    k.batchNormBackwardApply(px, pdy, pdx, p0, planes, c, hw, pg, pbeta, pm, pi, relu, consts);
  });
}

function checkLrn(what: string, x: WasmTensor, others: WasmTensor[], p: LrnParams): { n: number; c: number; hw: number } {
  const d = lrnDims(x.shape, p, what);
  for (const t of others) {
    check(t.size === x.size, what, () => `every tensor must have x's ${x.size} elements (x ${shapeStr(x.shape)}), got ${shapeStr(t.shape)}`);
  }
  return d;
}

export function lrnForward(cx: WasmCtx, x: WasmTensor, y: WasmTensor, p: LrnParams): void {
  const what = 'lrn.forward';
  const { n, c, hw } = checkLrn(what, x, [y], p);
  const scratch = cx.scratch('aux', c * hw * 4);
  cx.k.lrnForward(cx.ptr(x, what), cx.ptr(y, what), n, c, hw, p.size, p.alpha, p.beta, p.k, scratch);
}

// x (forward's input), y (forward's output), dy -> dx (written)
export function lrnBackward(cx: WasmCtx, x: WasmTensor, y: WasmTensor, dy: WasmTensor, dx: WasmTensor, p: LrnParams): void {
  const what = 'lrn.backward';
  const { n, c, hw } = checkLrn(what, x, [y, dy, dx], p);
  const scratch = cx.scratch('aux', 2 * c * hw * 4);
  cx.k.lrnBackward(cx.ptr(x, what), cx.ptr(y, what), cx.ptr(dy, what), cx.ptr(dx, what), n, c, hw, p.size, p.alpha, p.beta, p.k, scratch);
}

// ---- dropout, loss, accuracy -----------------------------------------------------------------

function dropout(cx: WasmCtx, inp: WasmTensor, out: WasmTensor, params: DropoutParams, what: string): void {
  dropoutShape(inp.shape, params);
  check(out.size === inp.size, what, () => `output ${shapeStr(out.shape)} must have the input's ${inp.size} elements (${shapeStr(inp.shape)})`);
  cx.k.dropout(cx.ptr(inp, what), cx.ptr(out, what), inp.size, params.seed, dropoutThreshold(params.p), dropoutScale(params.p));
}

// x [any] -> y [same]: y = x * mask / (1 - p), the mask of shaders/dropout.wgsl bit for bit
export function dropoutForward(cx: WasmCtx, x: WasmTensor, y: WasmTensor, params: DropoutParams): void {
  dropout(cx, x, y, params, 'dropout.forward');
}

export function dropoutBackward(cx: WasmCtx, dy: WasmTensor, dx: WasmTensor, params: DropoutParams): void {
  dropout(cx, dy, dx, params, 'dropout.backward');
}

// logits [N, K], labels [N] i32 -> dlogits [N, K], losses [N], total [1]
export function softmaxXent(
  cx: WasmCtx, logits: WasmTensor, labels: WasmTensor, dlogits: WasmTensor, losses: WasmTensor, total: WasmTensor, params: SoftmaxXentParams,
): void {
  const what = 'softmaxXent';
  const { n, k } = softmaxXentDims(logits, labels, dlogits, losses, total, what);
  cx.k.softmaxXent(
    cx.ptr(logits, what), cx.ptr(labels, what), cx.ptr(dlogits, what), cx.ptr(losses, what), cx.ptr(total, what), n, k, params.gradScale,
    smoothingOf(params, what),
  );
}

// logits [N, K], labels [N] i32 -> counts [2] u32: [#top-1 hits, #top-k hits] (= or +=)
export function topkCount(cx: WasmCtx, logits: WasmTensor, labels: WasmTensor, counts: WasmTensor, params: TopkParams = {}): void {
  const what = 'topkCount';
  const { n, k, topk } = topkDims(logits, labels, counts, params, what);
  cx.k.topkCount(cx.ptr(logits, what), cx.ptr(labels, what), cx.ptr(counts, what), n, k, Math.min(topk, 0x7fffffff), params.accumulate ? 1 : 0);
}
