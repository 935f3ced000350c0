// GPU optimiser steps (shaders/lars.wgsl via createOptimizer) against the float64 reference
// (src/ref/optim.ts) for several steps on a layout of awkward segment lengths, with a
// zero-weight segment, a zero-gradient segment, an empty one, one excluded from adaptation
// and one excluded from decay. Padding between segments holds a sentinel that must survive.
// The same under small binding limits (withBindingLimit): the layout is walked in windows,
// segments larger than a binding are split, and the result must be the same bits.
import { expect } from 'vitest';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { createOptimizer, parseOptimizerConfig, type OptimizerConfig, type ParamSegment } from '../../src/optim/index.ts';
// The reference takes the rate from the same pure schedule function the optimiser uses
// (tested on its own in test/optim/schedule.test.ts).
import { learningRate } from '../../src/optim/schedule.ts';
import { buildUpdateTable, ROW_U32 } from '../../src/optim/table.ts';
import * as ref from '../../src/ref/optim.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import { assertClose } from '../helpers/compare.ts';
import { gpuOnly, type OpSuite } from './suite.ts';

const PAD = 7; // sentinel in the padding between segments: the update must not touch it
const STEPS = 5;
const BATCH = 32;

interface Spec { name: string; length: number; adapt?: boolean; decay?: boolean; zeroW?: boolean; zeroG?: boolean }

const SPECS: Spec[] = [
  { name: 'len1', length: 1 },
  { name: 'zero-weights', length: 63, zeroW: true },
  { name: 'no-adapt', length: 64, adapt: false, decay: false },
  { name: 'empty', length: 0 },
  { name: 'no-decay', length: 1000, decay: false },
  { name: 'zero-grad', length: 100, zeroG: true },
  { name: 'len4097', length: 4097 },
];

interface Layout { specs: readonly Spec[]; segs: ParamSegment[]; n: number }

function layout(specs: readonly Spec[]): Layout {
  let off = 0;
  const segs = specs.map((s) => {
    const seg = { name: s.name, offset: off, length: s.length, adapt: s.adapt ?? true, decay: s.decay ?? true };
    off = Math.ceil((off + s.length + 1) / 64) * 64; // at least one padding float after each
    return seg;
  });
  return { specs, segs, n: off };
}

const SMALL = layout(SPECS);
// Segments longer than the smallest binding limit the split cases use ((4096 + 64) * 4
// bytes), and runs of small ones that straddle the windows' boundaries.
const LARGE = layout([
  ...SPECS, { name: 'len10000', length: 10_000 }, { name: 'len3000', length: 3000 }, { name: 'len20', length: 20, decay: false },
  { name: 'len9000', length: 9000, zeroW: true }, { name: 'len2', length: 2 },
]);
const SPLIT_LIMITS = [40_960, 16_640]; // bytes: 10240 and 4160 floats

function initialWeights(l: Layout, seed: number): Float32Array {
  const w = new Float32Array(l.n).fill(PAD);
  const rng = makeRng(seed);
  l.specs.forEach((s, i) => w.set(s.zeroW ? new Float32Array(s.length) : uniformF32(rng, s.length, -0.5, 0.5), l.segs[i]!.offset));
  return w;
}

/** Gradient sums for step t (zero in the padding and in the zero-gradient segment). */
function gradient(l: Layout, seed: number, t: number): Float32Array {
  const G = new Float32Array(l.n);
  const rng = makeRng(seed * 100 + t);
  l.specs.forEach((s, i) => { if (!s.zeroG) G.set(uniformF32(rng, s.length, -0.5, 0.6), l.segs[i]!.offset); });
  return G;
}

function config(over: Record<string, unknown>): OptimizerConfig {
  return parseOptimizerConfig({ lr: 2, momentum: 0.9, weightDecay: 0.01, eta: 0.01, warmupSteps: 2, warmupStartFactor: 0.1, totalSteps: 8, ...over });
}

/** Runs STEPS optimiser steps on the GPU; returns the final w and v. */
async function runGpu(gpu: Gpu, cfg: OptimizerConfig, seed: number, l: Layout = SMALL): Promise<{ w: Float32Array; v: Float32Array }> {
  const opt = createOptimizer(gpu, cfg, l.segs, l.n);
  const tw = gpu.upload(initialWeights(l, seed)), tg = gpu.empty([l.n]);
  for (let t = 0; t < STEPS; t++) {
    gpu.write(tg, gradient(l, seed, t));
    opt.step({ w: tw, g: tg, t, gradScale: 1 / BATCH });
  }
  const w = await gpu.readF32(tw), v = await gpu.readF32(opt.stateTensors[0]!.tensor);
  gpu.release(tw, tg);
  opt.destroy();
  return { w, v };
}

function runRef(cfg: OptimizerConfig, seed: number, l: Layout): { w: Float64Array; v: Float64Array; w0: Float64Array } {
  const w0 = Float64Array.from(initialWeights(l, seed));
  const w = w0.slice(), v = new Float64Array(l.n);
  for (let t = 0; t < STEPS; t++) {
    const k = { lr: learningRate(cfg, t), momentum: cfg.momentum, weightDecay: cfg.weightDecay, gradScale: 1 / BATCH };
    const G = Float64Array.from(gradient(l, seed, t));
    if (cfg.kind === 'lars') ref.larsStep(w, v, G, l.segs, k, cfg.eta);
    else ref.sgdStep(w, v, G, l.segs, k, cfg.nesterov);
  }
  return { w, v, w0 };
}

// f32 state through 5 steps: the observed worst error in w and v is ~6e-8 absolute (w and v
// round at ~3e-8 per step, lambda carries the f32 norms' ~1e-6 relative error); the bounds
// leave about 10x. Every segment that should move must move by far more than the tolerance,
// so the test cannot pass with an update that does nothing.
const W_TOL = { rtol: 1e-6, atol: 5e-7 };
const V_TOL = { rtol: 1e-5, atol: 5e-7 };

async function checkAgainstRef(gpu: Gpu, cfg: OptimizerConfig, seed: number, l: Layout = SMALL): Promise<{ w: Float32Array; v: Float32Array }> {
  const got = await runGpu(gpu, cfg, seed, l);
  const want = runRef(cfg, seed, l);
  for (const s of l.segs) {
    const r = (a: Float32Array | Float64Array) => a.subarray(s.offset, s.offset + s.length);
    assertClose(r(got.w), r(want.w), W_TOL, `${cfg.kind} w of '${s.name}'`);
    assertClose(r(got.v), r(want.v), V_TOL, `${cfg.kind} v of '${s.name}'`);
    let moved = 0;
    r(want.w).forEach((x, i) => { moved = Math.max(moved, Math.abs(x - r(want.w0)[i]!)); });
    // With no gradient and no decay a segment rightly stays put (checked by assertClose).
    const still = s.length === 0 || (s.name === 'zero-grad' && cfg.weightDecay === 0);
    if (!still && !(moved > 100 * W_TOL.atol)) throw new Error(`segment '${s.name}' moved only ${moved}: the test would not see a wrong update`);
  }
  // Padding: w keeps its sentinel, v stays 0.
  const inSeg = new Uint8Array(l.n);
  for (const s of l.segs) inSeg.fill(1, s.offset, s.offset + s.length);
  got.w.forEach((x, i) => { if (!inSeg[i] && x !== PAD) throw new Error(`padding w[${i}] = ${x}, expected ${PAD}`); });
  got.v.forEach((x, i) => { if (!inSeg[i] && x !== 0) throw new Error(`padding v[${i}] = ${x}, expected 0`); });
  return got;
}

const bits = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length);

function sameBits(what: string, a: { w: Float32Array; v: Float32Array }, b: { w: Float32Array; v: Float32Array }): void {
  for (const [name, x, y] of [['w', a.w, b.w], ['v', a.v, b.v]] as const) {
    const i = bits(x).findIndex((u, j) => u !== bits(y)[j]);
    if (i >= 0) throw new Error(`${what}: ${name}[${i}] differs: ${x[i]} vs ${y[i]}`);
  }
}

/**
 * LARGE against the reference with no limit and under each split limit, every split run
 * bitwise equal to the unsplit one (the norms do not depend on the windows, the update is
 * elementwise).
 */
async function checkSplit(gpu: Gpu, cfg: OptimizerConfig, seed: number): Promise<void> {
  const whole = await checkAgainstRef(gpu, cfg, seed, LARGE);
  let pieces = 0;
  for (const bytes of SPLIT_LIMITS) {
    // Every limit must give several windows, and some limit must split a segment.
    const t = buildUpdateTable(LARGE.segs, LARGE.n, { maxElems: bytes / 4, align: gpu.limits.minStorageBufferOffsetAlignment / 4 });
    if (!(t.windows.length > 1)) throw new Error(`a ${bytes}-byte limit gives one window: the case would not test windows`);
    pieces = Math.max(pieces, t.rows.length / ROW_U32);
    const split = await withBindingLimit(gpu, bytes, () => checkAgainstRef(gpu, cfg, seed, LARGE));
    sameBits(`${cfg.kind} under a ${bytes}-byte binding limit vs none`, split, whole);
  }
  if (!(pieces > LARGE.segs.filter((s) => s.length > 0).length)) throw new Error('no limit splits a segment: the case would not test splitting');
}

// Every case is GPU-only: the WebGPU optimizer's kernels are not Engine ops.
export const suite: OpSuite = {
  op: 'optim',
  cases: gpuOnly([
    {
      name: `LARS, ${STEPS} steps through warm-up into poly decay, 7 segments`,
      run: async (gpu) => void (await checkAgainstRef(gpu, config({ kind: 'lars', eta: 0.02 }), 1)),
    },
    {
      name: 'LARS with beta = 0 and the default eta',
      run: async (gpu) => void (await checkAgainstRef(gpu, config({ kind: 'lars', weightDecay: 0, eta: 0.001, lr: 20 }), 2)),
    },
    { name: `SGD with momentum, ${STEPS} steps`, run: async (gpu) => void (await checkAgainstRef(gpu, config({ kind: 'sgd' }), 3)) },
    {
      name: 'SGD with Nesterov momentum, step schedule',
      run: async (gpu) => void (await checkAgainstRef(gpu, config({ kind: 'sgd', nesterov: true, schedule: 'step', stepMilestones: [3] }), 4)),
    },
    {
      name: 'LARS and SGD are bitwise the same when run twice',
      async run(gpu) {
        for (const kind of ['lars', 'sgd'] as const) {
          sameBits(`${kind} run twice`, await runGpu(gpu, config({ kind }), 5), await runGpu(gpu, config({ kind }), 5));
        }
      },
    },
    {
      name: `LARS split into binding windows (${SPLIT_LIMITS.join(', ')} bytes), a segment 2.4x the smallest`,
      run: (gpu) => checkSplit(gpu, config({ kind: 'lars', eta: 0.02 }), 6),
    },
    { name: 'SGD (Nesterov) split into binding windows', run: (gpu) => checkSplit(gpu, config({ kind: 'sgd', nesterov: true }), 7) },
    {
      name: 'LARS split: bitwise the same when run twice under the same limit',
      run: (gpu) => withBindingLimit(gpu, SPLIT_LIMITS[1]!, async () => {
        sameBits('lars split run twice', await runGpu(gpu, config({ kind: 'lars' }), 8, LARGE), await runGpu(gpu, config({ kind: 'lars' }), 8, LARGE));
      }),
    },
    {
      name: 'LARS refuses a segment with trustFrom (only the host optimiser implements it); SGD ignores it',
      async run(gpu) {
        const segs: ParamSegment[] = [
          { name: 'fc.weight', offset: 0, length: 64, adapt: true, decay: true },
          { name: 'fc.bias', offset: 64, length: 8, adapt: false, decay: false, trustFrom: 0 },
        ];
        expect(() => createOptimizer(gpu, config({ kind: 'lars' }), segs, 128)).toThrow(
          /segment 'fc.bias' takes its layer's trust ratio \(trustFrom\), which only the host optimiser/,
        );
        createOptimizer(gpu, config({ kind: 'sgd' }), segs, 128).destroy();
      },
    },
    {
      name: 'an empty layout records nothing and leaves w alone',
      async run(gpu) {
        for (const kind of ['lars', 'sgd'] as const) {
          const opt = createOptimizer(gpu, config({ kind }), [], 64);
          const tw = gpu.upload(new Float32Array(64).fill(3)), tg = gpu.upload(new Float32Array(64).fill(1));
          opt.step({ w: tw, g: tg, t: 3, gradScale: 1 });
          assertClose(await gpu.readF32(tw), new Float32Array(64).fill(3), { rtol: 0, atol: 0 }, `${kind} w`);
          gpu.release(tw, tg);
          opt.destroy();
        }
      },
    },
  ]),
};
