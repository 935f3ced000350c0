// The host optimiser step (the one implementation every volunteer runs, whatever its backend)
// against the float64 reference, its determinism, and its bad-input errors.
import { describe, expect, it } from 'vitest';
import { hostOptimizerStep, sumSquares2 } from '../../src/optim/host.ts';
import { parseOptimizerConfig } from '../../src/optim/config.ts';
import { learningRate, powExact } from '../../src/optim/schedule.ts';
import type { ParamSegment } from '../../src/optim/types.ts';
import { larsStep, sgdStep } from '../../src/ref/optim.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose } from '../helpers/compare.ts';

// Awkward segments: a lone float, odd lengths, one without decay, one not adapted, a gap.
const SEGS: ParamSegment[] = [
  { name: 'a', offset: 0, length: 1, adapt: true, decay: true },
  { name: 'b', offset: 64, length: 257, adapt: true, decay: true },
  { name: 'bias', offset: 384, length: 7, adapt: false, decay: false },
  { name: 'bn', offset: 448, length: 13, adapt: true, decay: false },
  { name: 'zero-w', offset: 512, length: 33, adapt: true, decay: true },
];
const N = 576;

function setup(seed: number) {
  const rng = makeRng(seed);
  const w = uniformF32(rng, N);
  w.fill(0, 512, 545); // ||w|| = 0: lambda falls back to 1
  return { w, v: uniformF32(rng, N).map((x) => x * 0.01), G: uniformF32(rng, N).map((x) => x * 40) };
}

describe('hostOptimizerStep', () => {
  for (const kind of ['lars', 'sgd', 'sgd-nesterov'] as const) {
    it(`${kind}: three steps match the float64 reference`, () => {
      const cfg = parseOptimizerConfig({
        kind: kind === 'lars' ? 'lars' : 'sgd', lr: 0.3, totalSteps: 10, warmupSteps: 2, momentum: 0.9, weightDecay: 5e-4, nesterov: kind === 'sgd-nesterov',
      });
      const { w, v, G } = setup(3);
      const [w64, v64, G64] = [Float64Array.from(w), Float64Array.from(v), Float64Array.from(G)];
      for (let t = 0; t < 3; t++) {
        hostOptimizerStep(cfg, SEGS, { w, v, G, t, gradScale: 1 / 40 });
        const k = { lr: learningRate(cfg, t), momentum: cfg.momentum, weightDecay: cfg.weightDecay, gradScale: 1 / 40 };
        if (kind === 'lars') larsStep(w64, v64, G64, SEGS, k, cfg.eta);
        else sgdStep(w64, v64, G64, SEGS, k, cfg.nesterov);
      }
      assertClose(w, w64, { rtol: 1e-6, atol: 1e-7 }, `${kind} w`);
      assertClose(v, v64, { rtol: 1e-5, atol: 1e-7 }, `${kind} v`);
      // Floats outside every segment are never touched.
      const before = setup(3);
      for (let i = 1; i < 64; i++) expect(w[i]).toBe(before.w[i]);
    });
  }

  it('is bitwise deterministic (the same bits on every run: mixed rings depend on it)', () => {
    const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.5, totalSteps: 20 });
    const runs = [0, 1].map(() => {
      const s = setup(9);
      for (let t = 0; t < 5; t++) hostOptimizerStep(cfg, SEGS, { ...s, t, gradScale: 1 / 24 });
      return new Uint32Array(s.w.buffer).slice();
    });
    expect(runs[0]).toEqual(runs[1]);
  });

  it('is the agreed arithmetic bit for bit: each norm a float64 sum in index order, then the update', () => {
    // Spelled out here pass by pass, as the step was written before its two norms shared one loop: a change of
    // order or of an operation changes some bits, and peers on different versions would then disagree.
    const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.5, totalSteps: 20, momentum: 0.9, weightDecay: 5e-4 });
    const s = setup(11), want = setup(11);
    const gradScale = 1 / 24;
    for (let t = 0; t < 3; t++) {
      hostOptimizerStep(cfg, SEGS, { ...s, t, gradScale });
      const lr = learningRate(cfg, t);
      for (const seg of SEGS) {
        const beta = seg.decay ? cfg.weightDecay : 0;
        let rate = lr;
        if (seg.adapt) {
          let ww = 0, gg = 0;
          for (let i = seg.offset; i < seg.offset + seg.length; i++) ww += want.w[i]! * want.w[i]!;
          for (let i = seg.offset; i < seg.offset + seg.length; i++) gg += (want.G[i]! * gradScale) * (want.G[i]! * gradScale);
          const wn = Math.sqrt(ww), gn = Math.sqrt(gg);
          if (wn > 0 && gn > 0) rate = lr * ((cfg.eta * wn) / (gn + beta * wn));
        }
        for (let i = seg.offset; i < seg.offset + seg.length; i++) {
          const wi = want.w[i]!;
          const vi = Math.fround(cfg.momentum * want.v[i]! + rate * (want.G[i]! * gradScale + beta * wi));
          want.v[i] = vi;
          want.w[i] = wi - vi;
        }
      }
    }
    expect(new Uint32Array(s.w.buffer)).toEqual(new Uint32Array(want.w.buffer));
    expect(new Uint32Array(s.v.buffer)).toEqual(new Uint32Array(want.v.buffer));
  });

  it('sums both norms in index order in one pass: the same float64 bits as a pass for each', () => {
    // Values over 12 orders of magnitude: here the order of a float64 sum shows in its last bits.
    const rng = makeRng(5);
    const w = uniformF32(rng, 4099).map((x, i) => x * 10 ** ((i % 13) - 6)), G = uniformF32(rng, 4099).map((x, i) => x * 10 ** ((i % 7) - 3));
    const scale = 1 / 24;
    let ww = 0, gg = 0, reversed = 0;
    for (let i = 3; i < 4090; i++) ww += w[i]! * w[i]!;
    for (let i = 3; i < 4090; i++) gg += (G[i]! * scale) * (G[i]! * scale);
    for (let i = 4089; i >= 3; i--) reversed += w[i]! * w[i]!;
    expect(sumSquares2(w, G, 3, 4087, scale)).toEqual({ ww, gg });
    expect(reversed, 'the data is one where the order shows').not.toBe(ww);
  });

  it('refuses mismatched buffers, a bad gradScale and segments outside the buffer', () => {
    const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.5, totalSteps: 20 });
    const s = setup(1);
    expect(() => hostOptimizerStep(cfg, SEGS, { ...s, v: new Float32Array(3), t: 0, gradScale: 1 })).toThrow(/same length/);
    expect(() => hostOptimizerStep(cfg, SEGS, { ...s, t: 0, gradScale: 0 })).toThrow(/gradScale must be a finite number > 0/);
    expect(() => hostOptimizerStep(cfg, [{ name: 'x', offset: 570, length: 10, adapt: true, decay: true }], { ...s, t: 0, gradScale: 1 })).toThrow(/outside/);
  });
});

describe('hostOptimizerStep: a bias at its layer weight\'s trust ratio (trustFrom)', () => {
  // 'bias' takes segment 1's lambda ('b'); listed before its weight too, to show the order does not matter.
  const segs: ParamSegment[] = [{ ...SEGS[2]!, trustFrom: 1 }, SEGS[0]!, SEGS[1]!, SEGS[3]!, SEGS[4]!];
  const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.3, totalSteps: 10, warmupSteps: 2, weightDecay: 5e-4 });

  it('three steps match the float64 reference, and the bias moves at its layer\'s rate, not the global one', () => {
    const { w, v, G } = setup(4);
    const [w64, v64, G64] = [Float64Array.from(w), Float64Array.from(v), Float64Array.from(G)];
    const plain = setup(4);
    for (let t = 0; t < 3; t++) {
      hostOptimizerStep(cfg, segs, { w, v, G, t, gradScale: 1 / 40 });
      hostOptimizerStep(cfg, SEGS, { ...plain, t, gradScale: 1 / 40 });
      larsStep(w64, v64, G64, segs, { lr: learningRate(cfg, t), momentum: cfg.momentum, weightDecay: cfg.weightDecay, gradScale: 1 / 40 }, cfg.eta);
    }
    assertClose(w, w64, { rtol: 1e-6, atol: 1e-7 }, 'w');
    assertClose(v, v64, { rtol: 1e-5, atol: 1e-7 }, 'v');
    // Every other segment is bit for bit what it is without trustFrom; the bias is not.
    for (const s of SEGS.filter((x) => x.name !== 'bias')) expect(w.slice(s.offset, s.offset + s.length)).toEqual(plain.w.slice(s.offset, s.offset + s.length));
    const moved = (x: Float32Array) => Math.hypot(...Array.from(x.subarray(384, 391), (y, i) => y - setup(4).w[384 + i]!));
    // lambda = eta ||w|| / ||g|| is far below 1 here, so the borrowed rate moves the bias much less.
    expect(moved(w)).toBeLessThan(0.1 * moved(plain.w));
    expect(moved(w)).toBeGreaterThan(0);
  });

  it('refuses a trustFrom that names itself, no segment, an unadapted segment, or sits on an adapted one', () => {
    const s = setup(1);
    const step = (x: ParamSegment[]) => () => hostOptimizerStep(cfg, x, { ...s, t: 0, gradScale: 1 });
    expect(step([{ ...SEGS[2]!, trustFrom: 0 }])).toThrow(/segment 'bias' takes its trust ratio from segment 0, which is not another of the 1 segments/);
    expect(step([SEGS[0]!, { ...SEGS[2]!, trustFrom: 7 }])).toThrow(/from segment 7, which is not another/);
    expect(step([SEGS[0]!, { ...SEGS[2]!, trustFrom: 0.5 }])).toThrow(/from segment 0.5/);
    expect(
      step([{ ...SEGS[2]!, name: 'other' }, { ...SEGS[2]!, offset: 128, trustFrom: 0 }]),
    ).toThrow(/takes its trust ratio from 'other', which LARS does not adapt/);
    expect(step([SEGS[0]!, { ...SEGS[1]!, trustFrom: 0 }])).toThrow(/segment 'b' is adapted itself and also names trustFrom 'a'/);
    // SGD has no trust ratios: trustFrom is ignored.
    const sgd = parseOptimizerConfig({ kind: 'sgd', lr: 0.3, totalSteps: 10 });
    expect(() => hostOptimizerStep(sgd, [{ ...SEGS[2]!, trustFrom: 0 }], { ...s, t: 0, gradScale: 1 })).not.toThrow();
  });
});

describe('powExact', () => {
  it('multiplies for small integer powers, Math.pow otherwise', () => {
    expect(powExact(0.7, 0)).toBe(1);
    expect(powExact(0.7, 2)).toBe(0.7 * 0.7);
    expect(powExact(0.5, 3)).toBe(0.125);
    expect(powExact(0.7, 1.5)).toBe(Math.pow(0.7, 1.5));
  });
});
