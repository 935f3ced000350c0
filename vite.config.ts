import { defineConfig } from 'vitest/config';
import { wasmKernels } from './scripts/vite-wasm-plugin.mjs';

// Cross-origin isolation (as the coordinator serves the page, coordinator/serve-files.ts): the
// page and its workers get SharedArrayBuffer, so the wasm engine runs threads.
const isolation = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

// `npm run dev`: the page with hot reload against a running coordinator (npm start), whose
// API, data, session and signaling sockets are proxied: VT_COORDINATOR=http://host:port
// (default http://127.0.0.1:8080).
const coordinator = process.env.VT_COORDINATOR ?? 'http://127.0.0.1:8080';
const proxied = { target: coordinator, changeOrigin: true, ws: true };

export default defineConfig({
  root: '.',
  // Builds the wasm kernels (wasm/ -> src/wasm/build/kernels.wasm) when vite starts or builds.
  plugins: [wasmKernels()],
  publicDir: 'public',
  worker: { format: 'es' },
  build: { target: 'es2022', outDir: 'dist' },
  server: { fs: { allow: ['.'] }, headers: isolation, proxy: { '/api': proxied, '/data': proxied, '/signal': proxied } },
  preview: { headers: isolation },
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // GPU tests share one software device per file; files run one at a time so the
    // two cores are not split between Dawn instances.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
