// Quick start-up autotune of the GEMM variant: runs each candidate of src/gpu/tune.ts on a
// mid-size problem on THIS device and keeps the fastest. About a second on a CPU driver.
import type { Gpu } from '../gpu/runtime.ts';
import { GEMM_CANDIDATES, setGemmConfig, type GemmConfig } from '../gpu/tune.ts';
import { gemm } from './gemm.ts';

export interface TuneResult { config: GemmConfig; msPerCall: number[] }

export async function autotuneGemm(gpu: Gpu, size = 256, reps = 3): Promise<TuneResult> {
  const a = gpu.zeros([size, size]), b = gpu.zeros([size, size]), c = gpu.zeros([size, size]);
  const ms: number[] = [];
  for (const cfg of GEMM_CANDIDATES) {
    setGemmConfig(gpu, cfg);
    gemm(gpu, a, b, c); // compile the pipeline outside the timing
    await gpu.sync();
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) gemm(gpu, a, b, c);
    await gpu.sync();
    ms.push((performance.now() - t0) / reps);
  }
  gpu.release(a, b, c);
  let best = 0;
  ms.forEach((v, i) => { if (v < ms[best]!) best = i; });
  const config = GEMM_CANDIDATES[best]!;
  setGemmConfig(gpu, config);
  return { config, msPerCall: ms };
}
