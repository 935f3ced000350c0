import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import { dropoutScale, type DropoutParams } from '../../src/ops/dropout.ts';
import * as ref from '../../src/ref/dropout.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { withBindingLimit } from '../helpers/binding-limit.ts';
import { assertClose, FWD } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

/** Index of the first element that differs bit for bit, or -1. */
function firstBitDiff(a: Float32Array, b: Float32Array): number {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

/**
 * The engine's mask must equal the reference mask exactly, and kept values must be exactly
 * fround(x * fround(1 / (1 - p))) (one correctly rounded f32 multiply). Inputs are nonzero,
 * so a zero output means a dropped element.
 */
async function check<T extends TensorLike>(e: Engine<T>, n: number, params: DropoutParams): Promise<number> {
  const rng = makeRng(n + params.seed);
  const nonzero = (a: Float32Array): Float32Array => a.map((v) => (v === 0 ? 0.5 : v));
  const x = nonzero(uniformF32(rng, n)), dy = nonzero(uniformF32(rng, n));
  const tx = e.upload(x), tdy = e.upload(dy), ty = e.empty([n]), tdx = e.empty([n]);
  e.dropoutForward(tx, ty, params);
  e.dropoutBackward(tdy, tdx, params);
  const mask = ref.dropoutMask(n, params);
  const scale = dropoutScale(params.p);
  const exact = (v: Float32Array): Float32Array => v.map((u, i) => (mask[i] ? Math.fround(u * scale) : 0));
  for (const [name, got, inp] of [['y', await e.readF32(ty), x], ['dx', await e.readF32(tdx), dy]] as const) {
    const bad = firstBitDiff(got, exact(inp));
    if (bad >= 0) throw new Error(`dropout ${name}[${bad}] = ${got[bad]}, expected ${exact(inp)[bad]} (mask ${mask[bad]})`);
  }
  assertClose(await e.readF32(ty), ref.dropoutForward(Float64Array.from(x), params), FWD, 'dropout y vs float64');
  e.release(tx, tdy, ty, tdx);
  return mask.reduce((a, b) => a + b, 0) / n;
}

const small: [number, DropoutParams][] = [
  [1, { p: 0.5, seed: 1 }],
  [257, { p: 0, seed: 2 }],
  [4099, { p: 0.5, seed: 3 }],
  [4099, { p: 0.1, seed: 0xffffffff }],
  [1000, { p: 0.9, seed: 4 }],
];

const cases: OpCase[] = [
  ...small.map(([n, params]): OpCase => ({ name: `n=${n} p=${params.p} seed=${params.seed}`, run: async (e) => void (await check(e, n, params)) })),
  {
    name: 'kept fraction ~ 1 - p on 2^20 elements (p = 0.5, 0.25)',
    async run(e) {
      for (const p of [0.5, 0.25]) {
        const kept = await check(e, 1 << 20, { p, seed: 11 });
        // Binomial standard deviation sqrt(p(1-p)/n) < 5e-4: allow 6 of them.
        if (Math.abs(kept - (1 - p)) > 3e-3) throw new Error(`kept fraction ${kept} for p = ${p}`);
      }
    },
  },
  // 5000 floats in 4 KiB bindings: five ranges, the mask indexed by the whole-tensor index.
  {
    name: 'split into 4 KiB bindings, n=5000', gpuOnly: true,
    run: (e) => withBindingLimit(e.gpu, 4096, async () => void (await check(e, 5000, { p: 0.5, seed: 9 }))),
  },
];

export const suite: OpSuite = { op: 'dropout', cases };
