import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: '.',
  publicDir: 'public',
  worker: { format: 'es' },
  build: { target: 'es2022', outDir: 'dist' },
  server: { fs: { allow: ['.'] } },
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
