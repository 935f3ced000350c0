// Our volunteer's training step on the wasm engine, as the CPU benches time it: forward, loss,
// backward, the gradient read back (into a host array reused from step to step, as volunteers
// take theirs from src/train/grad-arrays.ts), LARS on the host (its loops in wasm, as volunteers
// run it: src/optim/host-wasm.ts), the weights written back.
import type { ModelSpec } from '../src/nn/graph.ts';
import { Model } from '../src/nn/model.ts';
import { parseOptimizerConfig } from '../src/optim/index.ts';
import { WasmHostOptimizer } from '../src/optim/host-wasm.ts';
import { recordGradients, uploadBatch } from '../src/train/step.ts';
import type { WasmEngine } from '../src/wasm/engine.ts';
import type { WasmTensor } from '../src/wasm/tensor.ts';

export interface WasmStepper {
  /** One step: its time (ms) and the batch's mean loss. */
  step(): Promise<{ ms: number; loss: number }>;
  destroy(): void;
}

/** A model (seed 1) on `engine` training on the batch (x, labels) with LARS. */
export async function wasmStepper(engine: WasmEngine, spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number): Promise<WasmStepper> {
  const model = new Model(engine, spec, { seed: 1 });
  const cfg = parseOptimizerConfig({ kind: 'lars', lr: 0.1, totalSteps: 1000 });
  const opt = await WasmHostOptimizer.create(model.layout.paramFloats);
  opt.w.set(await model.readParams());
  const host = { x, labels, shape: [batch, ...spec.input] as const };
  const grads = new Float32Array(model.layout.paramFloats);
  let tx: WasmTensor | null = null;
  let s = 0;
  return {
    async step() {
      const t0 = performance.now();
      tx = uploadBatch(model, host, tx);
      const total = recordGradients(model, tx, s);
      const loss = (await engine.readF32(total))[0]! / batch;
      await engine.readF32Into(model.grads, grads, 0);
      opt.G.set(grads);
      opt.step(cfg, model.layout.params, s, 1 / batch);
      engine.write(model.params, opt.w);
      s++;
      return { ms: performance.now() - t0, loss };
    },
    destroy() {
      if (tx) engine.release(tx);
      model.destroy();
    },
  };
}
