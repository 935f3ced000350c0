// The fused build against the plain one in the same run, step for step: two engines (fma 'auto'
// and 'off') with the same threads train the same model on the same batch, one step each in
// turn, so both meet the same machine (this host's speed drifts by 30% within minutes). The
// ratio of their median step times is the fused build's speed-up.
import type { ModelSpec } from '../src/nn/graph.ts';
import { WasmEngine } from '../src/wasm/engine.ts';
import type { WinogradMode } from '../src/wasm/ops-winograd.ts';
import { median } from './timing.ts';
import { wasmStepper } from './wasm-step.ts';

export interface FmaAb { threads: number; fusedMs: number; plainMs: number; speedup: number }

export async function fmaAb(
  spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number, threads: number, winograd: WinogradMode, rounds: number,
): Promise<FmaAb> {
  const fused = await WasmEngine.create({ threads, winograd, fma: 'auto' });
  const plain = await WasmEngine.create({ threads, winograd, fma: 'off' });
  if (!fused.fma) throw new Error('fma-ab: this runtime has no relaxed SIMD, so there is no fused build to compare');
  const a = await wasmStepper(fused, spec, x, labels, batch), b = await wasmStepper(plain, spec, x, labels, batch);
  try {
    const fa: number[] = [], pb: number[] = [];
    for (let r = 0; r < rounds + 2; r++) {
      const sa = await a.step(), sb = await b.step();
      if (r >= 2) { fa.push(sa.ms); pb.push(sb.ms); }
    }
    const fusedMs = median(fa), plainMs = median(pb);
    return { threads, fusedMs, plainMs, speedup: plainMs / fusedMs };
  } finally {
    a.destroy();
    b.destroy();
    fused.destroy();
    plain.destroy();
  }
}
