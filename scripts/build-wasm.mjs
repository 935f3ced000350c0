// Builds the wasm engine's kernels (wasm/*.ts, AssemblyScript) on demand, in four variants of the
// same sources:
//   src/wasm/build/kernels.wasm      one thread: a private imported memory (every page)
//   src/wasm/build/kernels-mt.wasm   threads: an imported SHARED memory (maximum 4 GiB), which
//                                    every thread of one engine instantiates (pages that are
//                                    cross-origin isolated, and Node)
//   kernels-fma.wasm, kernels-mt-fma.wasm   the same with relaxed SIMD: the GEMM kernels' multiply-
//                                    adds are f32x4.relaxed_madd (wasm/gemm.ts madd), one fused
//                                    instruction on CPUs with FMA; loaded where the runtime
//                                    validates relaxed SIMD (src/wasm/kernels.ts)
// ensureWasm() compiles a variant only when it is missing or was built from other sources,
// compiler version or flags (a SHA-256 of all three is kept next to each file). Nothing it
// writes is tracked by git. Called by WasmEngine.create() in Node, by the vite plugin
// (scripts/vite-wasm-plugin.mjs) at build start and dev-server start, and by
// `npm run build:wasm` (add --force to rebuild regardless).
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const WASM_SRC = join(root, 'wasm');
export const WASM_OUT = join(root, 'src', 'wasm', 'build', 'kernels.wasm');
export const WASM_OUT_THREADS = join(root, 'src', 'wasm', 'build', 'kernels-mt.wasm');
export const WASM_OUT_FMA = join(root, 'src', 'wasm', 'build', 'kernels-fma.wasm');
export const WASM_OUT_THREADS_FMA = join(root, 'src', 'wasm', 'build', 'kernels-mt-fma.wasm');
/** Largest shared memory, in 64 KiB pages (wasm32's 4 GiB; the engine may ask for less). */
export const MAX_SHARED_PAGES = 65536;
const ENTRY = join(WASM_SRC, 'kernels.ts');
const FLAGS = ['-O3', '--enable', 'simd', '--runtime', 'stub', '--importMemory', '--noAssert'];
const THREADS = ['--enable', 'threads', '--sharedMemory', '--maximumMemory', String(MAX_SHARED_PAGES)];
const FMA = ['--enable', 'relaxed-simd'];
const VARIANTS = [
  { out: WASM_OUT, flags: FLAGS },
  { out: WASM_OUT_THREADS, flags: [...FLAGS, ...THREADS] },
  { out: WASM_OUT_FMA, flags: [...FLAGS, ...FMA] },
  { out: WASM_OUT_THREADS_FMA, flags: [...FLAGS, ...THREADS, ...FMA] },
];

/** SHA-256 over the flags, the compiler version and every source file (sorted by name). */
async function sourceHash(flags) {
  const h = createHash('sha256');
  h.update(flags.join(' '));
  const pkg = JSON.parse(await readFile(join(root, 'node_modules', 'assemblyscript', 'package.json'), 'utf8'));
  h.update(`assemblyscript ${pkg.version}`);
  const files = (await readdir(WASM_SRC)).filter((f) => f.endsWith('.ts')).sort();
  for (const f of files) {
    h.update(`\0${f}\0`);
    h.update(await readFile(join(WASM_SRC, f)));
  }
  return h.digest('hex');
}

async function readOr(path, fallback) {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return fallback; // missing: build it
  }
}

async function compile(out, flags, hash) {
  const { default: asc } = await import('assemblyscript/asc');
  await mkdir(dirname(out), { recursive: true });
  // Unique temporary names, then rename: concurrent builders (test workers, several
  // volunteers) never see a half-written file.
  const tmp = `${out}.${process.pid}.${Date.now()}.tmp`;
  let log = '';
  const sink = { write: (s) => { log += String(s); return true; } };
  const { error } = await asc.main([ENTRY, '--outFile', tmp, ...flags], { stdout: sink, stderr: sink });
  if (error) {
    await rm(tmp, { force: true });
    throw new Error(`Compiling the wasm kernels (wasm/*.ts) failed: ${error.message}\n${log}\nFix the AssemblyScript source and run \`npm run build:wasm\`.`);
  }
  await rename(tmp, out);
  await writeFile(`${out}.sha256.${process.pid}.tmp`, hash);
  await rename(`${out}.sha256.${process.pid}.tmp`, `${out}.sha256`);
}

async function ensureVariant({ out, flags }, force) {
  const hash = await sourceHash(flags);
  const built = await readOr(`${out}.sha256`, '');
  const present = await stat(out).then((st) => st.size > 0, () => false);
  if (force || !present || built.trim() !== hash) await compile(out, flags, hash);
}

let pending = null;

/**
 * Makes sure every variant (src/wasm/build/kernels.wasm, kernels-mt.wasm and their -fma
 * builds) matches the sources; returns the path of the single-thread one (the others are
 * WASM_OUT_THREADS, WASM_OUT_FMA and WASM_OUT_THREADS_FMA).
 * Concurrent calls in one process share one check (and build); later calls check again
 * (cheap: a hash of a few small files), so a long-running dev server picks up edits.
 * @param {{ force?: boolean }} [opts]
 * @returns {Promise<string>}
 */
export function ensureWasm(opts = {}) {
  if (pending && !opts.force) return pending;
  const run = (async () => {
    for (const v of VARIANTS) await ensureVariant(v, !!opts.force);
    return WASM_OUT;
  })();
  pending = run;
  const clear = () => { if (pending === run) pending = null; };
  run.then(clear, clear);
  return run;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const t0 = Date.now();
  ensureWasm({ force: process.argv.includes('--force') }).then(
    (out) => console.log(`wasm kernels: ${out}, ${WASM_OUT_THREADS} and their -fma builds (${Date.now() - t0} ms)`),
    (e) => {
      console.error(e instanceof Error ? e.message : e);
      process.exit(1);
    },
  );
}
