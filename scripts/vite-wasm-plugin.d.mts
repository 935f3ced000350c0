// Types for scripts/vite-wasm-plugin.mjs, so vite.config.ts can import it under `tsc` (no allowJs).
import type { Plugin } from 'vite';

/** Builds the wasm kernels at build start and dev-server start, and again on edits under wasm/. */
export function wasmKernels(): Plugin;
