// The whole-model float64 reference against central differences of its own loss, on a tiny
// model that has every layer kind the models use.
import { describe, expect, it } from 'vitest';
import { tinyNet } from '../nn/tiny-net.ts';
import { initParams, layoutOf } from '../../src/nn/layout.ts';
import { refTrainStep } from '../../src/ref/model.ts';
import { makeRng } from '../../src/rng.ts';
import { compareArrays } from '../helpers/compare.ts';


describe('whole-model reference', () => {
  it('gradient matches central differences of the loss', () => {
    const spec = tinyNet();
    const layout = layoutOf(spec);
    const params = Float64Array.from(initParams(layout, 3));
    const rng = makeRng(5);
    const x = Float64Array.from({ length: 3 * 2 * 36 }, () => rng.normal());
    const labels = Int32Array.from([0, 2, 1]);
    const opts = { eps: 1e-5, momentum: 0.1, gradScale: 1 / 3, dropoutSeeds: spec.nodes.map((_, i) => 1000 + i) };
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
    const r = compareArrays(grad, numeric, { rtol: 1e-4, atol: 1e-7 }, 'model grad');
    expect(r.message).toMatch(/ok/);
  });
});
