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

async function check<T extends TensorLike>(e: Engine<T>, spec: ModelSpec, batch: number, bnGroup?: number): Promise<void> {
  const model = new Model(e, spec, { seed: 11, ...(bnGroup ? { bnGroup } : {}) });
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
      eps: 1e-5, momentum: 0.1, gradScale: 1 / batch, dropoutSeeds: spec.nodes.map((_, i) => dropoutSeed(stepSeed, i)), ...(bnGroup ? { bnGroup } : {}),
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

/** Ghost BN: the gradient SUM of a batch equals that of its micro-batches of whole groups, accumulated on the engine. */
async function splitCheck<T extends TensorLike>(e: Engine<T>, spec: ModelSpec): Promise<void> {
  const model = new Model(e, spec, { seed: 11, bnGroup: 2 });
  try {
    const [c, h, w] = spec.input;
    const x = uniformF32(makeRng(4), 6 * c * h * w);
    const labels = Int32Array.from({ length: 6 }, (_, i) => (i * 3) % spec.classes);
    const run = async (parts: number[]): Promise<Float32Array> => {
      model.zeroGrads();
      let at = 0;
      for (const n of parts) {
        const tx = e.upload(x.subarray(at * c * h * w, (at + n) * c * h * w), [n, c, h, w]);
        e.write(model.labelsTensor(n), labels.subarray(at, at + n));
        model.forward(tx, { train: true, seed: 5 });
        model.loss(1);
        model.backward();
        e.flush();
        const g = await e.readF32(model.grads);
        e.release(tx);
        at += n;
        if (at === 6) return g;
      }
      throw new Error('parts must cover the batch');
    };
    const whole = await run([6]);
    const split = await run([2, 4]);
    const scale = whole.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    assertClose(split, whole, { rtol: 1e-4, atol: 1e-5 * scale }, `${spec.name} gradient of micro-batches 2 + 4 against 6`);
    await expectReject(() => Promise.resolve(model.forward(e.upload(x.subarray(0, 3 * c * h * w), [3, c, h, w]), { train: true })), /not whole BN groups of 2/);
  } finally {
    model.destroy();
  }
}

async function expectReject(f: () => Promise<unknown>, pattern: RegExp): Promise<void> {
  let message = '(resolved)';
  try {
    await f();
  } catch (err) {
    message = err instanceof Error ? err.message : String(err);
  }
  if (!pattern.test(message)) throw new Error(`expected an error matching ${pattern}, got ${message}`);
}

export const suite: OpSuite = {
  op: 'model',
  cases: [
    { name: 'tiny net with every layer kind, batch 3', run: (e) => check(e, tinyNet(), 3) },
    { name: 'small CNN on 1x12x12, batch 2', run: (e) => check(e, smallCnn([1, 12, 12], 10), 2) },
    { name: 'ResNet-20 on 3x8x8, batch 2', run: (e) => check(e, resnet20([3, 8, 8], 10), 2) },
    { name: 'ResNet-20 on 3x8x8, batch 6 in ghost BN groups of 2', run: (e) => check(e, resnet20([3, 8, 8], 10), 6, 2) },
    {
      name: 'ResNet-20 on 3x8x8: a batch of 6 in groups of 2 gives the gradient of its micro-batches of 2 and 4 summed',
      run: (e) => splitCheck(e, resnet20([3, 8, 8], 10)),
    },
  ],
};
