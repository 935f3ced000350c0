// Options the wasm benches share.
import type { FmaMode } from '../src/wasm/engine.ts';
import type { WinogradMode } from '../src/wasm/ops-winograd.ts';

/** --NAME=VALUE, one of `values` (the first is the default). */
function choice<T extends string>(args: readonly string[], name: string, values: readonly [T, ...T[]]): T {
  const v = args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? values[0];
  const found = values.find((x) => x === v);
  if (found === undefined) throw new Error(`--${name} must be ${values.join(' or ')}, got ${v}`);
  return found;
}

/** --winograd=auto|f2|off (default auto): how the wasm engine runs 3x3 stride-1 convolutions (src/wasm/tensor.ts WinogradMode). */
export const parseWinograd = (args: readonly string[]): WinogradMode => choice(args, 'winograd', ['auto', 'f2', 'off']);

/** --fma=auto|off (default auto): the GEMM kernels' multiply-adds fused (relaxed SIMD, where the runtime has it) or a multiply then an add. */
export const parseFma = (args: readonly string[]): FmaMode => choice(args, 'fma', ['auto', 'off']);
