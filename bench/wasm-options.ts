// Options the wasm benches share.
import type { WinogradMode } from '../src/wasm/ops-winograd.ts';

/** --winograd=auto|off (default auto): how the wasm engine runs 3x3 stride-1 convolutions. */
export function parseWinograd(args: readonly string[]): WinogradMode {
  const v = args.find((a) => a.startsWith('--winograd='))?.slice('--winograd='.length) ?? 'auto';
  if (v !== 'auto' && v !== 'off') throw new Error(`--winograd must be auto or off, got ${v}`);
  return v;
}
