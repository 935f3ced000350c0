// The fused build against the plain one in the same run, step for step (bench/engine-ab.ts):
// engines with fma 'auto' and 'off', the same threads and Winograd setting.
import type { ModelSpec } from '../src/nn/graph.ts';
import type { WinogradMode } from '../src/wasm/ops-winograd.ts';
import { engineAb } from './engine-ab.ts';

export interface FmaAb { threads: number; fusedMs: number; plainMs: number; speedup: number }

export async function fmaAb(
  spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number, threads: number, winograd: WinogradMode, rounds: number,
): Promise<FmaAb> {
  const r = await engineAb(spec, x, labels, batch, threads, { winograd, fma: 'auto' }, { winograd, fma: 'off' }, rounds, (fused) => {
    if (!fused.fma) throw new Error('fma-ab: this runtime has no relaxed SIMD, so there is no fused build to compare');
  });
  return { threads, fusedMs: r.aMs, plainMs: r.bMs, speedup: r.speedup };
}
