// Vite plugin: builds the wasm kernels (scripts/build-wasm.mjs: kernels.wasm, the threaded
// kernels-mt.wasm and their -fma builds) before vite needs them, so `new URL('./build/kernels.wasm',
// import.meta.url)` (and the other three) in src/wasm/kernels.ts resolve in the page and in workers: at build
// start (vite build, which bundles the files as assets), when the dev server starts, and again
// in dev whenever a file under wasm/ changes (then the page reloads). Add to vite.config.ts:
// plugins: [wasmKernels()].
import { relative, sep } from 'node:path';
import { ensureWasm, WASM_SRC } from './build-wasm.mjs';

/** @returns {import('vite').Plugin} */
export function wasmKernels() {
  return {
    name: 'vt-wasm-kernels',
    async buildStart() {
      await ensureWasm();
    },
    async configureServer(server) {
      await ensureWasm();
      server.watcher.add(WASM_SRC);
      server.watcher.on('change', (file) => {
        if (relative(WASM_SRC, file).startsWith('..') || !file.endsWith('.ts') || file.includes(`${sep}node_modules${sep}`)) return;
        ensureWasm().then(
          () => server.ws.send({ type: 'full-reload' }),
          (e) => server.config.logger.error(e instanceof Error ? e.message : String(e)),
        );
      });
    },
  };
}
