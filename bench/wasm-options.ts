// Options the wasm benches share.
import type { FmaMode } from '../src/wasm/engine.ts';
import { relaxedSimd } from '../src/wasm/kernels.ts';
import type { WinogradMode } from '../src/wasm/ops-winograd.ts';

/** --winograd=auto|off (default auto): how the wasm engine runs 3x3 stride-1 convolutions. */
export function parseWinograd(args: readonly string[]): WinogradMode {
  const v = args.find((a) => a.startsWith('--winograd='))?.slice('--winograd='.length) ?? 'auto';
  if (v !== 'auto' && v !== 'off') throw new Error(`--winograd must be auto or off, got ${v}`);
  return v;
}

/** --fma=auto|off (default auto): the GEMM kernels' multiply-adds fused (relaxed SIMD, where the runtime has it) or a multiply then an add. */
export function parseFma(args: readonly string[]): FmaMode {
  const v = args.find((a) => a.startsWith('--fma='))?.slice('--fma='.length) ?? 'auto';
  if (v !== 'auto' && v !== 'off') throw new Error(`--fma must be auto or off, got ${v}`);
  return v;
}

/** Whether engines made with this setting run the fused build (as WasmEngine.create decides). */
export async function usesFma(mode: FmaMode): Promise<boolean> {
  return mode === 'auto' && (await relaxedSimd());
}
