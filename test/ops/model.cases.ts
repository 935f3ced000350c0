// Whole models on an Engine (every backend) against the float64 whole-model reference: loss,
// logits and the flat gradient after one forward + backward (training mode: batch statistics,
// dropout).
import { Model, dropoutSeed } from '../../src/nn/model.ts';
import type { ModelSpec } from '../../src/nn/graph.ts';
import { resnet20, smallCnn } from '../../src/nn/models.ts';
import { refTrainStep } from '../../src/ref/model.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { assertClose } from '../helpers/compare.ts';
import { tinyNet } from '../nn/tiny-net.ts';
import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import type { OpSuite } from './suite.ts';

async function check<T extends TensorLike>(e: Engine<T>, spec: ModelSpec, batch: number): Promise<void> {
  const model = new Model(e, spec, { seed: 11 });
  try {
    const rng = makeRng(batch);
    const [c, h, w] = spec.input;
    const x = uniformF32(rng, batch * c * h * w);
    const labels = Int32Array.from({ length: batch }, (_, i) => (i * 7) % spec.classes);
    const tx = e.upload(x, [batch, c, h, w]);
    e.write(model.labelsTensor(batch), labels);
    const stepSeed = 77;
    model.zeroGrads();
    model.forward(tx, { train: true, seed: stepSeed });
    const total = model.loss(1 / batch);
    model.backward();
    const [loss, logits, grad, params] = [await e.readF32(total), await e.readF32(model.logits), await e.readF32(model.grads), await model.readParams()];
    e.release(tx);
    const ref = refTrainStep(spec, model.layout, params, Float64Array.from(x), labels, {
      eps: 1e-5, momentum: 0.1, gradScale: 1 / batch, dropoutSeeds: spec.nodes.map((_, i) => dropoutSeed(stepSeed, i)),
    });
    assertClose(logits, ref.logits, { rtol: 1e-4, atol: 1e-4 }, `${spec.name} logits`);
    assertClose([loss[0]! / batch], [ref.loss], { rtol: 1e-4, atol: 1e-5 }, `${spec.name} loss`);
    // Gradients pass through many layers (and BN's 1/std): 1e-3 relative to the largest.
    const scale = ref.grad.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    assertClose(grad, ref.grad, { rtol: 2e-3, atol: 2e-4 * scale }, `${spec.name} gradient`);
  } finally {
    model.destroy();
  }
}

export const suite: OpSuite = {
  op: 'model',
  cases: [
    { name: 'tiny net with every layer kind, batch 3', run: (e) => check(e, tinyNet(), 3) },
    { name: 'small CNN on 1x12x12, batch 2', run: (e) => check(e, smallCnn([1, 12, 12], 10), 2) },
    { name: 'ResNet-20 on 3x8x8, batch 2', run: (e) => check(e, resnet20([3, 8, 8], 10), 2) },
  ],
};
