// Loading the kernels module (wasm/*.ts, AssemblyScript, built into ./build/kernels.wasm by
// scripts/build-wasm.mjs) and its typed exports. Pointers are byte addresses in the engine's
// memory (imported as env.memory); booleans are 0/1; u32 arguments may be passed as numbers up
// to 2^32 - 1 (wasm reads the same 32 bits).
//  - Node (tsx, vitest): ensureWasm() builds the file if it is missing or stale, then fs reads it.
//  - Browser page or Web Worker: vite serves / bundles `new URL('./build/kernels.wasm',
//    import.meta.url)` (scripts/vite-wasm-plugin.mjs builds it first); fetched and compiled
//    with instantiateStreaming. No DOM is used.

type Ptr = number;
type Flag = number;

/** The module's exports (wasm/kernels.ts). */
export interface Kernels {
  heapBase(): Ptr;
  gemmScratchBytes(): number;
  gemm(M: number, N: number, K: number, a: Ptr, lda: number, transA: Flag, b: Ptr, ldb: number, transB: Flag, c: Ptr, ldc: number, alpha: number, beta: number, scratch: Ptr): void;
  gemmNT(M: number, N: number, K: number, a: Ptr, lda: number, b: Ptr, ldb: number, c: Ptr, ldc: number, alpha: number, beta: number): void;
  im2col(x: Ptr, cin: number, h: number, w: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number, oh: number, ow: number, col: Ptr, ld: number): void;
  col2imAdd(col: Ptr, cin: number, h: number, w: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number, oh: number, ow: number, dx: Ptr, ld: number): void;
  copyRows(src: Ptr, srcLd: number, dst: Ptr, dstLd: number, rows: number, cols: number): void;
  add(x: Ptr, y: Ptr, z: Ptr, n: number): void;
  fill(x: Ptr, bits: number, n: number): void;
  reluForward(x: Ptr, y: Ptr, n: number): void;
  reluBackward(x: Ptr, dy: Ptr, dx: Ptr, n: number): void;
  biasAddInPlace(x: Ptr, b: Ptr, n: number, c: number, hw: number): void;
  biasBackward(dy: Ptr, db: Ptr, n: number, c: number, hw: number, accumulate: Flag): void;
  dropout(inp: Ptr, out: Ptr, n: number, seed: number, threshold: number, scale: number): void;
  maxPoolForward(x: Ptr, y: Ptr, argmax: Ptr, planes: number, h: number, w: number, oh: number, ow: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number): void;
  maxPoolBackward(dy: Ptr, argmax: Ptr, dx: Ptr, planes: number, h: number, w: number, oh: number, ow: number): void;
  avgPoolForward(x: Ptr, y: Ptr, planes: number, h: number, w: number, oh: number, ow: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number): void;
  avgPoolBackward(dy: Ptr, dx: Ptr, planes: number, h: number, w: number, oh: number, ow: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number): void;
  globalAvgPoolForward(x: Ptr, y: Ptr, planes: number, hw: number): void;
  globalAvgPoolBackward(dy: Ptr, dx: Ptr, planes: number, hw: number): void;
  batchNormStats(x: Ptr, n: number, c: number, hw: number, mean: Ptr, invstd: Ptr, runMean: Ptr, runVar: Ptr, eps: number, momentum: number): void;
  batchNormApply(x: Ptr, y: Ptr, n: number, c: number, hw: number, gamma: Ptr, beta: Ptr, m: Ptr, stat2: Ptr, mode: number, eps: number): void;
  batchNormBackward(x: Ptr, dy: Ptr, gamma: Ptr, mean: Ptr, invstd: Ptr, dx: Ptr, dgamma: Ptr, dbeta: Ptr, n: number, c: number, hw: number, accumulate: Flag): void;
  lrnForward(x: Ptr, y: Ptr, n: number, c: number, hw: number, size: number, alpha: number, beta: number, k: number, scratch: Ptr): void;
  lrnBackward(x: Ptr, y: Ptr, dy: Ptr, dx: Ptr, n: number, c: number, hw: number, size: number, alpha: number, beta: number, k: number, scratch: Ptr): void;
  softmaxXent(logits: Ptr, labels: Ptr, dlogits: Ptr, losses: Ptr, total: Ptr, n: number, k: number, scale: number): void;
  topkCount(logits: Ptr, labels: Ptr, counts: Ptr, n: number, k: number, topk: number, accumulate: Flag): void;
}

const NAMES: readonly (keyof Kernels)[] = [
  'heapBase', 'gemmScratchBytes', 'gemm', 'gemmNT', 'im2col', 'col2imAdd', 'copyRows', 'add', 'fill', 'reluForward', 'reluBackward',
  'biasAddInPlace', 'biasBackward', 'dropout', 'maxPoolForward', 'maxPoolBackward', 'avgPoolForward', 'avgPoolBackward',
  'globalAvgPoolForward', 'globalAvgPoolBackward', 'batchNormStats', 'batchNormApply', 'batchNormBackward', 'lrnForward',
  'lrnBackward', 'softmaxXent', 'topkCount',
];

export const isNode = (): boolean => typeof process !== 'undefined' && typeof process.versions?.node === 'string';

const UNSUPPORTED = 'This WebAssembly has no SIMD: use Chrome/Edge 91+, Firefox 89+, Safari 16.4+ or Node 16.4+';

/** The builder, relative to this file (a variable: vite must not bundle it as an asset). */
const BUILD_SCRIPT = '../../scripts/build-wasm.mjs';

/** Compiled once per realm (page, worker or Node process); each engine instantiates it with its own memory. */
let compiled: Promise<WebAssembly.Module> | null = null;

async function compileNode(): Promise<WebAssembly.Module> {
  // Variable specifiers: bundlers must not follow these into the browser build.
  const script = new URL(BUILD_SCRIPT, import.meta.url).href;
  const build = (await import(/* @vite-ignore */ script)) as { ensureWasm?: unknown };
  if (typeof build.ensureWasm !== 'function') throw new Error(`${script} does not export ensureWasm()`);
  const path: unknown = await (build.ensureWasm as () => Promise<unknown>)();
  if (typeof path !== 'string') throw new Error(`ensureWasm() returned ${String(path)}, not a path`);
  const fsName = 'node:fs/promises';
  const fs = (await import(/* @vite-ignore */ fsName)) as typeof import('node:fs/promises');
  return WebAssembly.compile(await fs.readFile(path));
}

async function compileBrowser(): Promise<WebAssembly.Module> {
  const url = new URL('./build/kernels.wasm', import.meta.url);
  const res = await fetch(url);
  if (!res.ok) throw new Error(`fetching the wasm kernels from ${url.href} failed (HTTP ${res.status}): run the page through vite (npm run dev / npm run build), which builds them.`);
  if (res.headers.get('content-type')?.startsWith('application/wasm')) return WebAssembly.compileStreaming(res);
  return WebAssembly.compile(await res.arrayBuffer());
}

function compile(): Promise<WebAssembly.Module> {
  if (!compiled) {
    compiled = (isNode() ? compileNode() : compileBrowser()).catch((e: unknown) => {
      compiled = null;
      if (e instanceof WebAssembly.CompileError) throw new Error(`${UNSUPPORTED} (${e.message}).`);
      throw e;
    });
  }
  return compiled;
}

/** Instantiates the kernels on `memory` (imported as env.memory). */
export async function loadKernels(memory: WebAssembly.Memory): Promise<Kernels> {
  const instance = await WebAssembly.instantiate(await compile(), { env: { memory } });
  const ex = instance.exports;
  const missing = NAMES.filter((n) => typeof ex[n] !== 'function');
  if (missing.length > 0) throw new Error(`the wasm kernels lack ${missing.join(', ')}: rebuild them with \`npm run build:wasm -- --force\`.`);
  return ex as unknown as Kernels;
}
