// Quick start-up autotune of the GEMM variant: runs each candidate of src/gpu/tune.ts on a
// mid-size problem on THIS device and keeps the fastest. About a second on a CPU driver. A
// real GPU does a 256^3 product in microseconds, all of it dispatch cost: there the problem is
// 1024^3 and timed over more calls, so the kernels' own speed decides.
import type { Gpu } from '../gpu/runtime.ts';
import { gemmCandidates, setGemmConfig, type GemmConfig } from '../gpu/tune.ts';
import { gemm } from './gemm.ts';

export interface TuneResult { config: GemmConfig; candidates: GemmConfig[]; msPerCall: number[] }

export async function autotuneGemm(gpu: Gpu, size = gpu.info.software ? 256 : 1024, reps = gpu.info.software ? 3 : 20): Promise<TuneResult> {
  const a = gpu.zeros([size, size]), b = gpu.zeros([size, size]), c = gpu.zeros([size, size]);
  const ms: number[] = [];
  const candidates = gemmCandidates(gpu);
  for (const cfg of candidates) {
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
  const config = candidates[best]!;
  setGemmConfig(gpu, config);
  return { config, candidates, msPerCall: ms };
}
