// Bundles bench/gpu/entry.ts (the kernels and step benches, TF.js's WebGPU backend and our
// shaders) into one ESM file for a machine without the packages: `node scripts/device/bundle.mjs OUT`.
// Dawn (the 'webgpu' package) stays outside: src/gpu/node-device.ts imports it by name at run
// time, from a node_modules folder beside the bundle (scripts/device/gpu-pack.sh packs it).
import { build } from 'esbuild';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';

const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/device/bundle.mjs OUTFILE');
  process.exit(2);
}

/** `import code from './x.wgsl?raw'` as vite and scripts/raw-hooks.mjs read it: the file's text. */
const raw = {
  name: 'raw',
  setup(b) {
    b.onResolve({ filter: /\?raw$/ }, (a) => ({ path: resolve(a.resolveDir, a.path.slice(0, -'?raw'.length)), namespace: 'raw' }));
    b.onLoad({ filter: /.*/, namespace: 'raw' }, async (a) => ({ contents: await readFile(a.path, 'utf8'), loader: 'text', resolveDir: dirname(a.path) }));
  },
};

await build({
  entryPoints: ['bench/gpu/entry.ts'],
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outfile: out,
  // esbuild is only reached where the gradients were not registered (never in the bundle).
  external: ['esbuild', 'webgpu'],
  // TF.js's CommonJS dependencies call require(); an ESM bundle needs one made for it.
  banner: { js: "import { createRequire as __vtRequire } from 'node:module'; const require = __vtRequire(import.meta.url);" },
  plugins: [raw],
  logLevel: 'warning',
  legalComments: 'none',
});
