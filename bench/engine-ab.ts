// Two wasm engine settings against each other in the same run, step for step: two engines with
// the same threads train the same model on the same batch, one step each in turn, so both meet the
// same machine (this host's speed drifts by 30% within minutes). The ratio of their median step
// times is the first setting's speed-up over the second's.
import type { ModelSpec } from '../src/nn/graph.ts';
import { WasmEngine, type WasmEngineOptions } from '../src/wasm/engine.ts';
import { median } from './timing.ts';
import { wasmStepper, type WasmStepper } from './wasm-step.ts';

export interface EngineAb { threads: number; aMs: number; bMs: number; speedup: number }

/** Median step times of `a` and `b` (threads set by `threads`) over `rounds` alternating steps after 2 warm-up steps each. */
export async function engineAb(
  spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number, threads: number, a: WasmEngineOptions, b: WasmEngineOptions, rounds: number,
  check?: (ea: WasmEngine, eb: WasmEngine) => void,
): Promise<EngineAb> {
  const ea = await WasmEngine.create({ ...a, threads });
  const eb = await WasmEngine.create({ ...b, threads });
  let sa: WasmStepper | null = null, sb: WasmStepper | null = null;
  try {
    check?.(ea, eb);
    const a1 = (sa = await wasmStepper(ea, spec, x, labels, batch));
    const b1 = (sb = await wasmStepper(eb, spec, x, labels, batch));
    const ta: number[] = [], tb: number[] = [];
    for (let r = 0; r < rounds + 2; r++) {
      const ra = await a1.step(), rb = await b1.step();
      if (r >= 2) { ta.push(ra.ms); tb.push(rb.ms); }
    }
    const aMs = median(ta), bMs = median(tb);
    return { threads, aMs, bMs, speedup: bMs / aMs };
  } finally {
    sa?.destroy();
    sb?.destroy();
    ea.destroy();
    eb.destroy();
  }
}
