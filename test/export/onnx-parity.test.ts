// Every model of src/nn/models.ts, with random weights and non-trivial BN statistics: our
// engine's inference forward (wasm, as on a machine without a GPU) against ONNX Runtime
// running the exported file. Logits must agree to 1e-4 of their scale, at two batch sizes
// (the batch dimension is symbolic). Small inputs keep it fast: AlexNet at 64x64 (its
// smallest input is 63: three 3x2 max-pools after the stride-4 conv), ResNet-50 at 32x32.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InferenceSession } from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFileChunksAtomic } from '../../src/export/job.ts';
import { ExportError } from '../../src/export/errors.ts';
import { BATCH_DIM, exportOnnx } from '../../src/export/to-onnx.ts';
import { GraphBuilder, type ModelSpec } from '../../src/nn/graph.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { MODEL_NAMES, type ModelName, alexnet, modelByName, resnet50 } from '../../src/nn/models.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';
import { engineLogits, ortLogits, randomTrained, readOnnxHeader, relativeDifference } from './helpers.ts';

/** One small configuration per model name (a Record: a model added to models.ts must be added here). */
const CASES: Record<ModelName, () => ModelSpec> = {
  'small-cnn': () => modelByName('small-cnn', [3, 32, 32], 10),
  'small-cnn-bn': () => modelByName('small-cnn-bn', [3, 32, 32], 10),
  'tiny-cnn': () => modelByName('tiny-cnn', [1, 28, 28], 7),
  resnet20: () => modelByName('resnet20', [3, 32, 32], 10),
  alexnet: () => alexnet(false, 10, [3, 64, 64]),
  'alexnet-bn': () => alexnet(true, 10, [3, 64, 64]),
  resnet50: () => resnet50(10, [3, 32, 32]),
};

/**
 * The layers no model above uses, or uses mildly: average pooling with padding (padding must
 * not count), a strong LRN of size 3 (AlexNet's alpha 1e-4 barely moves its outputs), max
 * pooling with padding, a dropout between layers, a linear layer without bias.
 */
function layerZoo(): ModelSpec {
  const g = new GraphBuilder();
  let x = g.conv(g.input, 'conv1', 6, 3, { stride: 2, pad: 1 });
  x = g.lrn(g.relu(x), { size: 3, alpha: 0.5, beta: 0.75, k: 1 });
  x = g.avgpool(x, 3, 2, 1);
  x = g.maxpool(g.bn(g.conv(x, 'conv2', 8, 3, { pad: 1, bias: false }), 'bn2'), 2, 1, 1);
  x = g.dropout(g.flatten(x), 0.3);
  g.linear(g.relu(g.linear(x, 'fc1', 12, false)), 'fc2', 5);
  return { name: 'layer-zoo', input: [3, 15, 13], classes: 5, nodes: g.nodes };
}

const TOLERANCE = 1e-4;

describe('ONNX export matches our engine in ONNX Runtime', () => {
  let engine: WasmEngine;
  let dir: string;
  beforeAll(async () => {
    engine = await WasmEngine.create();
    dir = await mkdtemp(join(tmpdir(), 'vt-onnx-'));
  });
  afterAll(async () => {
    engine?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('covers every model models.ts names', () => {
    expect(Object.keys(CASES).sort()).toEqual([...MODEL_NAMES].sort());
  });

  it('refuses an LRN of even size (ONNX centres its window differently)', () => {
    const g = new GraphBuilder();
    g.linear(g.gap(g.lrn(g.conv(g.input, 'conv', 4, 3), { size: 4, alpha: 1e-4, beta: 0.75, k: 2 })), 'fc', 3);
    const spec: ModelSpec = { name: 'even-lrn', input: [1, 8, 8], classes: 3, nodes: g.nodes };
    const layout = layoutOf(spec);
    const run = () => exportOnnx({ spec, weights: new Float32Array(layout.paramFloats), bnState: new Float32Array(layout.stateFloats), metadata: [] });
    expect(run).toThrow(ExportError);
    expect(run).toThrow(/LRN of size 4/);
  });

  ([...MODEL_NAMES, 'layer-zoo'] as const).forEach((name, k) => {
    it(`${name}: logits agree within ${TOLERANCE} (relative to their scale)`, async () => {
      const spec = name === 'layer-zoo' ? layerZoo() : CASES[name]();
      const layout = layoutOf(spec);
      const { weights, bnState } = randomTrained(layout, 100 + k);
      const file = join(dir, `${name}.onnx`);
      const meta: [string, string][] = [['model', name], ['classes', JSON.stringify(Array.from({ length: spec.classes }, (_, i) => `c${i}`))]];
      await writeFileChunksAtomic(file, exportOnnx({ spec, weights, bnState, metadata: meta }));
      const header = readOnnxHeader(new Uint8Array(await readFile(file)));
      expect(header.opset).toBe(17);
      expect(header.metadata.get('model')).toBe(name);

      const session = await InferenceSession.create(file);
      try {
        const input = session.inputMetadata[0]!;
        expect(input.isTensor && input.shape).toEqual([BATCH_DIM, ...spec.input]);
        for (const batch of [3, 1]) {
          const x = uniformF32(makeRng(7 + batch), batch * spec.input.reduce((a, b) => a * b, 1), -2, 2);
          const ours = await engineLogits(engine, spec, weights, bnState, x, batch);
          const theirs = await ortLogits(session, spec, x, batch);
          const d = relativeDifference(theirs, ours);
          console.log(
            `${name} batch ${batch}: max |diff| ${d.maxAbs.toExponential(2)}, logit scale ${d.scale.toExponential(2)}, relative ${d.rel.toExponential(2)}`,
          );
          expect(d.rel).toBeLessThanOrEqual(TOLERANCE);
          // Not vacuous: the images get different logits.
          if (batch > 1) expect(relativeDifference(ours.subarray(0, spec.classes), ours.subarray(spec.classes, 2 * spec.classes)).rel).toBeGreaterThan(1e-3);
        }
      } finally {
        await session.release();
      }
    });
  });
});
