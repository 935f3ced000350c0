// Per-adapter choice of kernel variants and tile sizes. CPU drivers (llvmpipe, SwiftShader)
// want register blocking with no workgroup memory; real GPUs want workgroup tiling
// (RECIPES.md measured 1.5-3x either way). autotuneGemm() measures the candidates on the
// device itself and keeps the fastest in gpu.tuning.
import type { Constants, Gpu } from './runtime.ts';

/**
 * `blocked4` is used where its vec4 conditions hold (no transposes, K and N multiples of 4)
 * and falls back to `blocked` with the same TM and workgroup elsewhere.
 */
export interface GemmConfig { entry: 'blocked' | 'blocked4' | 'tiled' | 'tiled8'; constants: Constants }

export const GEMM_CANDIDATES: GemmConfig[] = [
  { entry: 'blocked4', constants: { TM: 4, TN: 8, WGX: 16, WGY: 4 } },
  { entry: 'blocked4', constants: { TM: 8, TN: 8, WGX: 8, WGY: 8 } },
  { entry: 'blocked', constants: { TM: 4, TN: 8, WGX: 16, WGY: 4 } },
  { entry: 'blocked', constants: { TM: 4, TN: 4, WGX: 16, WGY: 4 } },
  { entry: 'blocked', constants: { TM: 8, TN: 8, WGX: 8, WGY: 8 } },
  { entry: 'blocked', constants: { TM: 8, TN: 4, WGX: 16, WGY: 4 } },
  // Real GPUs only (autotuneGemm): barriers are slow on CPU drivers, and llvmpipe's loop limit
  // would cut its long-K loop (16 KiB of workgroup memory, 128x128 tiles; src/ops/gemm.ts).
  { entry: 'tiled8', constants: {} },
  { entry: 'tiled', constants: {} },
];

/** The candidates worth timing on this adapter. */
export function gemmCandidates(gpu: Gpu): GemmConfig[] {
  const room = gpu.limits.maxComputeWorkgroupStorageSize >= 16384 && gpu.limits.maxComputeInvocationsPerWorkgroup >= 256;
  return GEMM_CANDIDATES.filter((c) => c.entry !== 'tiled8' || (!gpu.info.software && room));
}

const chosen = new WeakMap<Gpu, GemmConfig>();

export function gemmConfig(gpu: Gpu): GemmConfig {
  const c = chosen.get(gpu);
  if (c) return c;
  return gpu.info.software ? GEMM_CANDIDATES[0]! : GEMM_CANDIDATES[GEMM_CANDIDATES.length - 1]!;
}

export function setGemmConfig(gpu: Gpu, cfg: GemmConfig): void {
  chosen.set(gpu, cfg);
  gpu.tuning.set('gemm', { ...cfg.constants, tiled: cfg.entry === 'tiled' ? 1 : 0 });
}
