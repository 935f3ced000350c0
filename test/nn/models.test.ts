import { describe, expect, it } from 'vitest';
import { ALIGN_FLOATS, initParams, layoutOf, summary } from '../../src/nn/layout.ts';
import { MODEL_NAMES, modelByName, resnet20, smallCnn } from '../../src/nn/models.ts';
import { GraphBuilder, inferShapes } from '../../src/nn/graph.ts';
import { VtError } from '../../src/errors.ts';

describe('models', () => {
  it('have the canonical parameter counts', () => {
    expect(layoutOf(modelByName('resnet50')).paramCount).toBe(25_557_032);
    expect(layoutOf(modelByName('alexnet')).paramCount).toBe(61_100_840); // torchvision's AlexNet
    const r20 = layoutOf(resnet20()).paramCount;
    expect(r20).toBeGreaterThan(269_000);
    expect(r20).toBeLessThan(275_000); // ~0.27M (projection shortcuts add ~3k)
    // AlexNet-BN: convs lose their biases (1,152) and gain gamma+beta (2,304).
    expect(layoutOf(modelByName('alexnet-bn')).paramCount).toBe(61_100_840 - 1_152 + 2_304);
    // The small CNN with BN: its convs lose their biases (32 + 64 + 128) and gain gamma + beta.
    expect(layoutOf(modelByName('small-cnn-bn')).paramCount).toBe(layoutOf(smallCnn()).paramCount - 224 + 2 * 224);
  });

  it('produce [classes] logits and the expected intermediate shapes', () => {
    for (const name of MODEL_NAMES) {
      const spec = modelByName(name);
      const shapes = inferShapes(spec);
      expect(shapes[shapes.length - 1]).toEqual([spec.classes]);
    }
    const alex = inferShapes(modelByName('alexnet'));
    expect(alex).toContainEqual([64, 55, 55]); // conv1 11x11 s4 p2 on 224
    expect(alex).toContainEqual([256, 6, 6]); // before flatten: 9216 features
    const r50 = inferShapes(modelByName('resnet50'));
    expect(r50).toContainEqual([2048, 7, 7]);
    expect(inferShapes(smallCnn([1, 28, 28]))).toContainEqual([128, 3, 3]); // MNIST
  });

  it('fit downsampled ImageNet: the ImageNet models at 64, 128 and 224 pixels', () => {
    const at = (name: 'alexnet' | 'alexnet-bn' | 'resnet50', px: number) => inferShapes(modelByName(name, [3, px, px], 1000));
    // AlexNet below 128 px: conv1 7x7 s2 p3 (64 -> 32), so the last pool leaves 3x3, not 1x1.
    expect(at('alexnet', 64)).toContainEqual([64, 32, 32]);
    expect(at('alexnet', 64)).toContainEqual([256, 3, 3]);
    expect(at('alexnet-bn', 64)).toContainEqual([256, 3, 3]);
    expect(at('alexnet', 128)).toContainEqual([256, 3, 3]); // the original stem: 128 -> 31 -> 15 -> 7 -> 3
    expect(at('alexnet', 224)).toContainEqual([256, 6, 6]);
    // ResNet-50 below 128 px: a 3x3 stride-1 stem, so 64x64 reaches the last stage at 4x4 like 128x128.
    expect(at('resnet50', 64)).toContainEqual([2048, 4, 4]);
    expect(at('resnet50', 128)).toContainEqual([2048, 4, 4]);
    expect(at('resnet50', 224)).toContainEqual([2048, 7, 7]);
    for (const px of [64, 128, 224]) for (const name of ['alexnet', 'alexnet-bn', 'resnet50'] as const) expect(at(name, px).at(-1)).toEqual([1000]);
    // The 224 stems are the canonical models (parameter counts above); the small ResNet stem has fewer conv1 weights.
    expect(layoutOf(modelByName('resnet50', [3, 64, 64], 1000)).paramCount).toBe(25_557_032 - 64 * 3 * (49 - 9));
  });

  it('align every tensor to 64 floats, in one flat buffer without overlap', () => {
    const l = layoutOf(modelByName('resnet50'));
    let end = 0;
    for (const p of l.params) {
      expect(p.offset % ALIGN_FLOATS).toBe(0);
      expect(p.offset).toBeGreaterThanOrEqual(end);
      end = p.offset + p.length;
    }
    expect(l.paramFloats).toBeGreaterThanOrEqual(end);
    expect(l.params.length).toBe(161);
  });

  it('initialise deterministically from the seed (He normal, BN gamma 1)', () => {
    const l = layoutOf(resnet20());
    const a = initParams(l, 42), b = initParams(l, 42), c = initParams(l, 43);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
    expect(Buffer.from(a.buffer).equals(Buffer.from(c.buffer))).toBe(false);
    const w = l.params.find((p) => p.name === 'layer3.0.conv1.weight')!;
    const v = a.subarray(w.offset, w.offset + w.length);
    const std = Math.sqrt(v.reduce((s, x) => s + x * x, 0) / v.length);
    expect(std).toBeCloseTo(Math.sqrt(2 / w.fanIn), 2);
    const gamma = l.params.find((p) => p.role === 'bn-gamma')!;
    expect([...a.subarray(gamma.offset, gamma.offset + gamma.length)].every((x) => x === 1)).toBe(true);
  });

  it('print a summary of the layout', () => {
    const s = summary(smallCnn(), layoutOf(smallCnn()));
    expect(s).toContain('conv1.weight');
    expect(s).toMatch(/parameters: 620,362/);
  });

  it('reject graphs whose shapes do not fit, with the node named', () => {
    const g = new GraphBuilder();
    g.linear(g.input, 'fc', 10);
    expect(() => inferShapes({ name: 'bad', input: [3, 8, 8], classes: 10, nodes: g.nodes })).toThrow(VtError);
    expect(() => inferShapes({ name: 'bad', input: [3, 8, 8], classes: 10, nodes: g.nodes })).toThrow(/node 1 \(linear fc\).*flatten/);
  });
});
