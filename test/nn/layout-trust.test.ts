// biasTrust 'layer' (src/nn/layout.ts): each conv / linear bias that LARS does not adapt takes
// its layer weight's trust ratio (trustFrom); BN gamma / beta keep the global rate; nothing
// changes without it or when biases are adapted themselves.
import { describe, expect, it } from 'vitest';
import { layoutOf } from '../../src/nn/layout.ts';
import { modelByName } from '../../src/nn/models.ts';

describe("layout biasTrust 'layer'", () => {
  it('points every bias of the small CNN at the weight of its own layer', () => {
    const params = layoutOf(modelByName('small-cnn', [3, 32, 32], 10), { biasTrust: 'layer' }).params;
    const biases = params.filter((p) => p.role === 'bias');
    expect(biases.map((b) => b.name)).toEqual(['conv1.bias', 'conv2.bias', 'conv3.bias', 'fc1.bias', 'fc2.bias']);
    for (const b of biases) {
      const w = params[b.trustFrom!]!;
      expect([w.name, w.role, w.node, w.adapt]).toEqual([b.name.replace('.bias', '.weight'), 'weight', b.node, true]);
    }
    expect(params.filter((p) => p.role !== 'bias').every((p) => p.trustFrom === undefined)).toBe(true);
  });

  it('leaves BN gamma / beta at the global rate, and adds nothing by default or when biases are adapted', () => {
    const bn = layoutOf(modelByName('resnet20', [3, 32, 32], 10), { biasTrust: 'layer' }).params;
    expect(bn.filter((p) => p.role === 'bn-gamma' || p.role === 'bn-beta').every((p) => p.trustFrom === undefined)).toBe(true);
    expect(bn.find((p) => p.name === 'fc.bias')?.trustFrom).toBe(bn.findIndex((p) => p.name === 'fc.weight'));
    const spec = modelByName('small-cnn', [3, 32, 32], 10);
    expect(layoutOf(spec).params.some((p) => p.trustFrom !== undefined)).toBe(false);
    expect(layoutOf(spec, { biasTrust: 'layer', adaptBiasAndBn: true }).params.some((p) => p.trustFrom !== undefined)).toBe(false);
  });
});
