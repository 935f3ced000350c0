// The whole-model float64 reference against central differences of its own loss, on a tiny
// model that has every layer kind the models use.
import { describe, expect, it } from 'vitest';
import { tinyNet } from '../nn/tiny-net.ts';
import { initParams, layoutOf } from '../../src/nn/layout.ts';
import { refTrainStep } from '../../src/ref/model.ts';
import { makeRng } from '../../src/rng.ts';
import { compareArrays } from '../helpers/compare.ts';

function fdCheck(batch: number, bnGroup?: number): string {
  const spec = tinyNet();
  const layout = layoutOf(spec);
  const params = Float64Array.from(initParams(layout, 3));
  const rng = makeRng(5);
  const x = Float64Array.from({ length: batch * 2 * 36 }, () => rng.normal());
  const labels = Int32Array.from({ length: batch }, (_, i) => (i * 2) % 3);
  const opts = { eps: 1e-5, momentum: 0.1, gradScale: 1 / batch, dropoutSeeds: spec.nodes.map((_, i) => 1000 + i), ...(bnGroup ? { bnGroup } : {}) };
  const { grad } = refTrainStep(spec, layout, params, x, labels, opts);
  const eps = 1e-6;
  const numeric = new Float64Array(layout.paramFloats);
  for (const p of layout.params) {
    for (let i = p.offset; i < p.offset + p.length; i++) {
      const old = params[i]!;
      params[i] = old + eps;
      const lp = refTrainStep(spec, layout, params, x, labels, opts).loss;
      params[i] = old - eps;
      const lm = refTrainStep(spec, layout, params, x, labels, opts).loss;
      params[i] = old;
      numeric[i] = (lp - lm) / (2 * eps);
    }
  }
  return compareArrays(grad, numeric, { rtol: 1e-4, atol: 1e-7 }, 'model grad').message;
}

describe('whole-model reference', () => {
  it('gradient matches central differences of the loss', () => {
    expect(fdCheck(3)).toMatch(/ok/);
  });

  it('with ghost batch norm (BN statistics per group of 2 of 4 images) the gradient matches central differences', () => {
    expect(fdCheck(4, 2)).toMatch(/ok/);
  });

  it('ghost batch norm with one group is plain batch norm, and with groups it is not', () => {
    const spec = tinyNet();
    const layout = layoutOf(spec);
    const params = Float64Array.from(initParams(layout, 3));
    const rng = makeRng(9);
    const x = Float64Array.from({ length: 4 * 2 * 36 }, () => rng.normal());
    const labels = Int32Array.from([0, 1, 2, 1]);
    const o = { eps: 1e-5, momentum: 0.1, gradScale: 1 };
    const whole = refTrainStep(spec, layout, params, x, labels, o);
    expect(refTrainStep(spec, layout, params, x, labels, { ...o, bnGroup: 4 }).grad).toEqual(whole.grad);
    const halves = refTrainStep(spec, layout, params, x, labels, { ...o, bnGroup: 2 });
    expect(halves.grad.some((g, i) => Math.abs(g - whole.grad[i]!) > 1e-6)).toBe(true);
    expect(() => refTrainStep(spec, layout, params, x, labels, { ...o, bnGroup: 3 })).toThrow(/not whole BN groups of 3/);
  });
});
