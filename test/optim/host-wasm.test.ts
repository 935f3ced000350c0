// The host optimiser's loops in wasm (src/optim/host-wasm.ts) against the JavaScript loops
// (src/optim/host.ts): the same bits of w and v, step after step, for LARS (trust ratios from
// norms, a segment on its layer's ratio, zero norms), SGD and Nesterov, on awkward segments and
// values (subnormal, huge, exact zeros, negative zero); and the training state that uses them.
import { describe, expect, it } from 'vitest';
import { TrainingState } from '../../src/client/state.ts';
import { Model } from '../../src/nn/model.ts';
import { smallCnn } from '../../src/nn/models.ts';
import { parseOptimizerConfig } from '../../src/optim/config.ts';
import { hostOptimizerStep, sumSquares2 } from '../../src/optim/host.ts';
import { WasmHostOptimizer } from '../../src/optim/host-wasm.ts';
import type { ParamSegment } from '../../src/optim/types.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';

// A lone float, odd lengths, a segment without decay, one not adapted on its layer's ratio, one with ||w|| = 0, a gap.
const SEGS: ParamSegment[] = [
  { name: 'a', offset: 0, length: 1, adapt: true, decay: true },
  { name: 'conv.w', offset: 64, length: 1031, adapt: true, decay: true },
  { name: 'conv.b', offset: 1100, length: 7, adapt: false, decay: false, trustFrom: 1 },
  { name: 'bn', offset: 1120, length: 13, adapt: true, decay: false },
  { name: 'zero-w', offset: 1136, length: 33, adapt: true, decay: true },
  { name: 'plain', offset: 1170, length: 5, adapt: false, decay: true },
];
const N = 1200;

function values(seed: number): { w: Float32Array; v: Float32Array; G: Float32Array } {
  const rng = makeRng(seed);
  const w = uniformF32(rng, N), v = uniformF32(rng, N).map((x) => x * 0.01), G = uniformF32(rng, N).map((x) => x * 40);
  w.fill(0, 1136, 1169);
  // Specials where their rounding is most likely to differ between implementations.
  w[70] = 1e-40; w[71] = -1e-45; w[72] = -0; w[73] = 3e38; G[74] = 1e-42; G[75] = -0; G[76] = 2e37; v[77] = 1e-39;
  return { w, v, G };
}

const bitsOf = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length).slice();

describe('the wasm optimiser loops', () => {
  for (const kind of ['lars', 'sgd', 'sgd-nesterov'] as const) {
    it(`${kind}: five steps give JavaScript's bits of w and v`, async () => {
      const cfg = parseOptimizerConfig({
        kind: kind === 'lars' ? 'lars' : 'sgd', lr: 0.3, totalSteps: 10, warmupSteps: 2, momentum: 0.9, weightDecay: 5e-4, nesterov: kind === 'sgd-nesterov',
      });
      const js = values(5);
      const opt = await WasmHostOptimizer.create(N);
      opt.w.set(js.w);
      opt.v.set(js.v);
      for (let t = 0; t < 5; t++) {
        const G = values(100 + t).G;
        hostOptimizerStep(cfg, SEGS, { ...js, G, t, gradScale: 1 / 40 });
        opt.G.set(G);
        opt.step(cfg, SEGS, t, 1 / 40);
        expect(bitsOf(opt.w), `w after step ${t}`).toEqual(bitsOf(js.w));
        expect(bitsOf(opt.v), `v after step ${t}`).toEqual(bitsOf(js.v));
      }
      // The floats outside every segment are untouched, and w moved.
      expect(opt.w[1]).toBe(values(5).w[1]);
      expect(bitsOf(opt.w)).not.toEqual(bitsOf(values(5).w));
    });
  }

  it('sums the norms in index order: sumSquares2\'s float64 bits, four parameters a loop and every tail', async () => {
    // Values over 12 orders of magnitude, where the order of a float64 sum shows in its last bits (test/optim/host.test.ts).
    const n = 4099, rng = makeRng(6);
    const opt = await WasmHostOptimizer.create(n);
    opt.w.set(uniformF32(rng, n).map((x, i) => x * 10 ** ((i % 13) - 6)));
    opt.G.set(uniformF32(rng, n).map((x, i) => x * 10 ** ((i % 7) - 3)));
    for (const [off, len] of [[0, 4099], [3, 4087], [1, 4094], [2, 4093], [5, 3], [7, 0]] as const) {
      expect(opt.norms(off, len, 1 / 24), `[${off}, ${off + len})`).toEqual(sumSquares2(opt.w, opt.G, off, len, 1 / 24));
    }
    let reversed = 0;
    for (let i = 4098; i >= 0; i--) reversed += opt.w[i]! * opt.w[i]!;
    expect(reversed, 'the data is one where the order shows').not.toBe(sumSquares2(opt.w, opt.G, 0, n, 1).ww);
  });

  it('refuses a parameter count that is not whole, or that does not fit 4 GiB', async () => {
    await expect(WasmHostOptimizer.create(1.5)).rejects.toThrow(/whole number of parameters/);
    await expect(WasmHostOptimizer.create(400_000_000)).rejects.toThrow(/do not fit wasm's 4 GiB/);
  });
});

describe('TrainingState with the wasm optimiser', () => {
  it('creates it, and steps to the bits of a state whose loops run in JavaScript', async () => {
    const e = await WasmEngine.create();
    const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.5, totalSteps: 20, momentum: 0.9, weightDecay: 5e-4 });
    const [ma, mb] = [new Model(e, smallCnn([3, 16, 16], 10), { seed: 2 }), new Model(e, smallCnn([3, 16, 16], 10), { seed: 2 })];
    const wasm = await TrainingState.create(ma, cfg), js = new TrainingState(mb, cfg);
    try {
      expect([wasm.hostLoops, wasm.why, js.hostLoops]).toEqual(['wasm', '', 'js']);
      wasm.reset(7);
      js.reset(7);
      const n = ma.layout.paramFloats, rng = makeRng(3);
      for (let t = 0; t < 3; t++) {
        const G = uniformF32(rng, n);
        wasm.backup();
        wasm.applyUpdate(G, t, 64);
        js.applyUpdate(G, t, 64);
        expect(bitsOf(wasm.w)).toEqual(bitsOf(js.w));
        expect(bitsOf(wasm.v)).toEqual(bitsOf(js.v));
      }
      // The engine got the new weights, and restore() takes the last step back from the backup.
      expect(bitsOf(await e.readF32(ma.params))).toEqual(bitsOf(wasm.w));
      const after = bitsOf(wasm.w);
      wasm.restore();
      expect(bitsOf(wasm.w)).not.toEqual(after);
      expect(() => wasm.applyUpdate(new Float32Array(n - 1), 3, 64)).toThrow(/the gradient has/);
    } finally {
      wasm.destroy(); js.destroy(); ma.destroy(); mb.destroy(); e.destroy();
    }
  });
});
