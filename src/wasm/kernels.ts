// Loading the kernels module (wasm/*.ts, AssemblyScript, built by scripts/build-wasm.mjs into
// ./build/kernels.wasm, ./build/kernels-mt.wasm for a shared memory, and -fma builds of both
// with relaxed SIMD's fused multiply-add in the GEMM kernels) and its typed exports. Pointers
// are byte addresses in the engine's memory (imported as env.memory); booleans are 0/1; u32
// arguments may be passed as numbers up to 2^32 - 1 (wasm reads the same 32 bits).
//  - Node (tsx, vitest): ensureWasm() builds the files if missing or stale, then fs reads one.
//  - Browser page or Web Worker: vite serves / bundles `new URL('./build/kernels.wasm',
//    import.meta.url)` (and the other three; scripts/vite-wasm-plugin.mjs builds them first);
//    fetched and compiled with instantiateStreaming. No DOM is used.

type Ptr = number;
type Flag = number;

/** The module's exports (wasm/kernels.ts). */
export interface Kernels {
  heapBase(): Ptr;
  gemmScratchBytes(): number;
  gemm(
    M: number, N: number, K: number, a: Ptr, lda: number, transA: Flag, b: Ptr, ldb: number, transB: Flag, c: Ptr, ldc: number, alpha: number, beta: number,
    scratch: Ptr,
  ): void;
  gemmNT(M: number, N: number, K: number, a: Ptr, lda: number, b: Ptr, ldb: number, c: Ptr, ldc: number, alpha: number, beta: number): void;
  gemmPanels(M: number, N: number, K: number, a: Ptr, b: Ptr, c: Ptr, ldc: number, tile: Ptr): void;
  /** `count` gemmPanels calls, the i-th on a + i aStep, b + i bStep, c + i cStep (bytes): Winograd's positions as one command. */
  gemmPanelsRun(M: number, N: number, K: number, a: Ptr, aStep: number, b: Ptr, bStep: number, c: Ptr, cStep: number, ldc: number, tile: Ptr,
    count: number): void;
  /** `count` gemmNT calls, the i-th on a + i aStep, b + i bStep, c + i cStep (bytes). */
  gemmNTRun(M: number, N: number, K: number, a: Ptr, lda: number, b: Ptr, ldb: number, c: Ptr, ldc: number, alpha: number, beta: number,
    aStep: number, bStep: number, cStep: number, count: number): void;
  /** C = A B^T with A and B of segments along K (a filter gradient read where the images lie): wasm/gemm.ts gemmSegNT. */
  gemmSegNT(M: number, N: number, K: number, a: Ptr, sA: number, segA: number, b: Ptr, sB: number, segB: number, c: Ptr, ldc: number, scratch: Ptr): void;
  /** gemm with B and C of segments (several images' 1x1 convolution at once): wasm/gemm.ts gemmSeg. */
  gemmSeg(
    M: number, N: number, K: number, a: Ptr, lda: number, transA: Flag, b: Ptr, seg: number, segB: number, c: Ptr, segC: number, alpha: number,
    beta: number, scratch: Ptr,
  ): void;
  im2col(
    x: Ptr, cin: number, h: number, w: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number, oh: number, ow: number,
    col: Ptr, ld: number,
  ): void;
  col2imAdd(
    col: Ptr, cin: number, h: number, w: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number, oh: number, ow: number,
    dx: Ptr, ld: number,
  ): void;
  copyRows(src: Ptr, srcLd: number, dst: Ptr, dstLd: number, rows: number, cols: number): void;
  /** U's 4-row panels [b0, b1) (wasm/winograd.ts), each position's `plane` bytes apart. */
  wgFilter(w: Ptr, cout: number, cin: number, u: Ptr, turned: Flag, plane: number, b0: number, b1: number): void;
  wgInputScratchBytes(th: number, tw: number): number;
  wgInput(
    x: Ptr, c0: number, c1: number, h: number, w: number, ph: number, pw: number, th: number, tw: number, v: Ptr, ldT: number, chans: number, t0: number,
    pad: Ptr, panels: Flag, plane: number,
  ): void;
  wgOutput(
    m: Ptr, c0: number, c1: number, oh: number, ow: number, th: number, tw: number, ldT: number, chans: number, t0: number, y: Ptr, accumulate: Flag,
    plane: number,
  ): void;
  wgGradOut(
    dy: Ptr, c0: number, c1: number, oh: number, ow: number, th: number, tw: number, g: Ptr, ldT: number, chans: number, t0: number, plane: number,
  ): void;
  wgFilterGrad(du: Ptr, e0: number, e1: number, count: number, dw: Ptr, accumulate: Flag): void;
  /** F(4x4, 3x3) (wasm/winograd4.ts): the wg* kernels' arguments, 36 positions, scratch, and the bytes between positions' planes. */
  wg4Filter(w: Ptr, cout: number, cin: number, u: Ptr, turned: Flag, plane: number, b0: number, b1: number): void;
  wg4ScratchBytes(th: number, tw: number): number;
  wg4Input(
    x: Ptr, c0: number, c1: number, h: number, w: number, ph: number, pw: number, th: number, tw: number, v: Ptr, ldT: number, chans: number, t0: number,
    pad: Ptr, panels: Flag, plane: number,
  ): void;
  wg4Output(
    m: Ptr, c0: number, c1: number, oh: number, ow: number, th: number, tw: number, ldT: number, chans: number, t0: number, y: Ptr, accumulate: Flag,
    scratch: Ptr, plane: number,
  ): void;
  wg4GradOut(
    dy: Ptr, c0: number, c1: number, oh: number, ow: number, th: number, tw: number, g: Ptr, ldT: number, chans: number, t0: number, scratch: Ptr,
    plane: number,
  ): void;
  wg4FilterGrad(du: Ptr, e0: number, e1: number, count: number, dw: Ptr, accumulate: Flag, scratch: Ptr): void;
  add(x: Ptr, y: Ptr, z: Ptr, n: number): void;
  fill(x: Ptr, bits: number, n: number): void;
  reluForward(x: Ptr, y: Ptr, n: number): void;
  reluBackward(x: Ptr, dy: Ptr, dx: Ptr, n: number): void;
  biasAddInPlace(x: Ptr, b: Ptr, n: number, c: number, hw: number): void;
  biasBackward(dy: Ptr, db: Ptr, n: number, c: number, hw: number, accumulate: Flag, c0: number, c1: number): void;
  biasRelu(x: Ptr, b: Ptr, y: Ptr, n: number, c: number, hw: number): void;
  reluBiasBackward(y: Ptr, dy: Ptr, dx: Ptr, db: Ptr, n: number, c: number, hw: number, accumulate: Flag, c0: number, c1: number): void;
  optimNorms(w: Ptr, g: Ptr, len: number, scale: number): void;
  optimSumW(): number;
  optimSumG(): number;
  optimUpdate(w: Ptr, v: Ptr, g: Ptr, len: number, gradScale: number, beta: number, rate: number, m: number, nesterov: Flag): void;
  dropout(inp: Ptr, out: Ptr, n: number, seed: number, threshold: number, scale: number): void;
  maxPoolForward(
    x: Ptr, y: Ptr, argmax: Ptr, planes: number, h: number, w: number, oh: number, ow: number, kh: number, kw: number, sh: number, sw: number,
    ph: number, pw: number,
  ): void;
  maxPoolBackward(dy: Ptr, argmax: Ptr, dx: Ptr, planes: number, h: number, w: number, oh: number, ow: number, twoByTwo: Flag): void;
  poolReluBackward(dy: Ptr, argmax: Ptr, y: Ptr, dx: Ptr, sums: Ptr, planes: number, h: number, w: number, oh: number, ow: number, twoByTwo: Flag): void;
  biasFromPlaneSums(sums: Ptr, db: Ptr, n: number, c: number, accumulate: Flag, c0: number, c1: number): void;
  avgPoolForward(
    x: Ptr, y: Ptr, planes: number, h: number, w: number, oh: number, ow: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number,
  ): void;
  avgPoolBackward(
    dy: Ptr, dx: Ptr, planes: number, h: number, w: number, oh: number, ow: number, kh: number, kw: number, sh: number, sw: number, ph: number, pw: number,
  ): void;
  globalAvgPoolForward(x: Ptr, y: Ptr, planes: number, hw: number): void;
  globalAvgPoolBackward(dy: Ptr, dx: Ptr, planes: number, hw: number): void;
  batchNormSums(x: Ptr, p0: number, planes: number, c: number, hw: number, mean: Ptr, sums: Ptr, dev: Flag): void;
  batchNormMean(sums: Ptr, n: number, c: number, hw: number, mean: Ptr, c0: number, c1: number): void;
  batchNormVar(
    sums: Ptr, n: number, c: number, hw: number, mean: Ptr, invstd: Ptr, runMean: Ptr, runVar: Ptr, eps: number, momentum: number, c0: number, c1: number,
  ): void;
  batchNormApply(
    x: Ptr, y: Ptr, p0: number, planes: number, c: number, hw: number, gamma: Ptr, beta: Ptr, m: Ptr, stat2: Ptr, mode: number, eps: number,
    relu: Flag,
  ): void;
  batchNormBackwardSums(
    x: Ptr, dy: Ptr, p0: number, planes: number, P: number, c: number, hw: number, gamma: Ptr, beta: Ptr, mean: Ptr, invstd: Ptr, relu: Flag, sums: Ptr,
  ): void;
  batchNormBackwardReduce(
    sums: Ptr, n: number, c: number, hw: number, gamma: Ptr, invstd: Ptr, dgamma: Ptr, dbeta: Ptr, accumulate: Flag, c0: number, c1: number, consts: Ptr,
  ): void;
  batchNormBackwardApply(
    x: Ptr, dy: Ptr, dx: Ptr, p0: number, planes: number, c: number, hw: number, gamma: Ptr, beta: Ptr, mean: Ptr, invstd: Ptr, relu: Flag, consts: Ptr,
  ): void;
  lrnForward(x: Ptr, y: Ptr, n: number, c: number, hw: number, size: number, alpha: number, beta: number, k: number, scratch: Ptr): void;
  lrnBackward(x: Ptr, y: Ptr, dy: Ptr, dx: Ptr, n: number, c: number, hw: number, size: number, alpha: number, beta: number, k: number, scratch: Ptr): void;
  softmaxXent(logits: Ptr, labels: Ptr, dlogits: Ptr, losses: Ptr, total: Ptr, n: number, k: number, scale: number, eps: number): void;
  topkCount(logits: Ptr, labels: Ptr, counts: Ptr, n: number, k: number, topk: number, accumulate: Flag): void;
}

/** Every export, in a fixed order (threads name kernels by index in this list). */
export const KERNEL_NAMES: readonly (keyof Kernels)[] = [
  'heapBase', 'gemmScratchBytes', 'gemm', 'gemmNT', 'im2col', 'col2imAdd', 'copyRows', 'add', 'fill', 'reluForward', 'reluBackward',
  'biasAddInPlace', 'biasBackward', 'dropout', 'maxPoolForward', 'maxPoolBackward', 'avgPoolForward', 'avgPoolBackward',
  'globalAvgPoolForward', 'globalAvgPoolBackward', 'batchNormSums', 'batchNormMean', 'batchNormVar', 'batchNormApply', 'batchNormBackwardSums',
  'batchNormBackwardReduce', 'batchNormBackwardApply', 'lrnForward',
  'lrnBackward', 'softmaxXent', 'topkCount', 'wgFilter', 'wgInputScratchBytes', 'wgInput', 'wgOutput', 'wgGradOut', 'wgFilterGrad',
  'gemmPanels', 'biasRelu', 'reluBiasBackward', 'optimNorms', 'optimSumW', 'optimSumG', 'optimUpdate',
  'wg4Filter', 'wg4ScratchBytes', 'wg4Input', 'wg4Output', 'wg4GradOut', 'wg4FilterGrad', 'gemmSeg', 'gemmSegNT', 'gemmPanelsRun', 'gemmNTRun',
  'poolReluBackward', 'biasFromPlaneSums',
];

export const isNode = (): boolean => typeof process !== 'undefined' && typeof process.versions?.node === 'string';

const UNSUPPORTED = 'This WebAssembly has no SIMD: use Chrome/Edge 91+, Firefox 89+, Safari 16.4+ or Node 16.4+';

/** The builder, relative to this file (a variable: vite must not bundle it as an asset). */
const BUILD_SCRIPT = '../../scripts/build-wasm.mjs';

/**
 * Which build: 'single' (a private memory) or 'threads' (a shared memory), each plain or '-fma'
 * (relaxed SIMD: the GEMM kernels multiply-add with f32x4.relaxed_madd, see wasm/gemm.ts madd).
 */
export type KernelVariant = 'single' | 'threads' | 'single-fma' | 'threads-fma';

/** The variant for a thread count and FMA choice. */
export const kernelVariant = (threads: boolean, fma: boolean): KernelVariant =>
  `${threads ? 'threads' : 'single'}${fma ? '-fma' : ''}`;

/** The smallest module with relaxed SIMD: one function returning f32x4.relaxed_madd of three v128 constants. */
function relaxedProbe(): Uint8Array<ArrayBuffer> {
  const zero = [0xfd, 0x0c, ...new Array<number>(16).fill(0)]; // v128.const 0
  const body = [0x00, ...zero, ...zero, ...zero, 0xfd, 0x85, 0x02, 0x0b]; // no locals; f32x4.relaxed_madd (0xfd 0x105); end
  return Uint8Array.of(
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // types: () -> v128
    0x03, 0x02, 0x01, 0x00, // one function of type 0
    0x0a, body.length + 2, 0x01, body.length, ...body, // its code
  );
}

let relaxed: Promise<boolean> | null = null;

/**
 * Whether this runtime runs relaxed SIMD (Chrome/Edge 114+, Node 22+). Node 20 has it behind a
 * V8 flag, which is set here when the probe fails (V8 reads it when it next compiles, workers
 * included); where the flag is unknown or changes nothing the answer stays false.
 */
export function relaxedSimd(): Promise<boolean> {
  relaxed ??= (async () => {
    const probe = relaxedProbe();
    if (WebAssembly.validate(probe)) return true;
    if (!isNode()) return false;
    const v8Name = 'node:v8';
    const v8 = (await import(/* @vite-ignore */ v8Name)) as typeof import('node:v8');
    v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
    return WebAssembly.validate(probe);
  })();
  return relaxed;
}

/** Compiled once per realm (page, worker or Node process) and variant; each engine instantiates it with its own memory. */
const compiled = new Map<KernelVariant, Promise<WebAssembly.Module>>();

async function compileNode(variant: KernelVariant): Promise<WebAssembly.Module> {
  // Variable specifiers: bundlers must not follow these into the browser build.
  const script = new URL(BUILD_SCRIPT, import.meta.url).href;
  const build = (await import(/* @vite-ignore */ script)) as Record<string, unknown>;
  if (typeof build.ensureWasm !== 'function') throw new Error(`${script} does not export ensureWasm()`);
  const single: unknown = await (build.ensureWasm as () => Promise<unknown>)();
  const names: Record<KernelVariant, string> = {
    single: 'WASM_OUT', threads: 'WASM_OUT_THREADS', 'single-fma': 'WASM_OUT_FMA', 'threads-fma': 'WASM_OUT_THREADS_FMA',
  };
  const path = variant === 'single' ? single : build[names[variant]];
  if (typeof path !== 'string') throw new Error(`${script} gave ${String(path)}, not a path, for the ${variant} kernels`);
  const fsName = 'node:fs/promises';
  const fs = (await import(/* @vite-ignore */ fsName)) as typeof import('node:fs/promises');
  return WebAssembly.compile(await fs.readFile(path));
}

async function compileBrowser(variant: KernelVariant): Promise<WebAssembly.Module> {
  // Literal URLs: vite bundles the four files as assets.
  const urls: Record<KernelVariant, () => URL> = {
    single: () => new URL('./build/kernels.wasm', import.meta.url),
    threads: () => new URL('./build/kernels-mt.wasm', import.meta.url),
    'single-fma': () => new URL('./build/kernels-fma.wasm', import.meta.url),
    'threads-fma': () => new URL('./build/kernels-mt-fma.wasm', import.meta.url),
  };
  const url = urls[variant]();
  const res = await fetch(url);
  if (!res.ok) {
    throw new Error(`fetching the wasm kernels from ${url.href} failed (HTTP ${res.status}): `
      + 'run the page through vite (npm run dev / npm run build), which builds them.');
  }
  if (res.headers.get('content-type')?.startsWith('application/wasm')) return WebAssembly.compileStreaming(res);
  return WebAssembly.compile(await res.arrayBuffer());
}

/** The compiled module of a variant (the threaded one is also what the workers instantiate). */
export function compileKernels(variant: KernelVariant = 'single'): Promise<WebAssembly.Module> {
  let c = compiled.get(variant);
  if (!c) {
    c = (isNode() ? compileNode(variant) : compileBrowser(variant)).catch((e: unknown) => {
      compiled.delete(variant);
      if (e instanceof WebAssembly.CompileError) throw new Error(`${UNSUPPORTED} (${e.message}).`);
      throw e;
    });
    compiled.set(variant, c);
  }
  return c;
}

/** Instantiates the kernels on `memory` (imported as env.memory; shared for the threaded variant). */
export async function loadKernels(memory: WebAssembly.Memory, variant: KernelVariant = 'single'): Promise<Kernels> {
  const instance = await WebAssembly.instantiate(await compileKernels(variant), { env: { memory } });
  const ex = instance.exports;
  const missing = KERNEL_NAMES.filter((n) => typeof ex[n] !== 'function');
  if (missing.length > 0) throw new Error(`the wasm kernels lack ${missing.join(', ')}: rebuild them with \`npm run build:wasm -- --force\`.`);
  return ex as unknown as Kernels;
}
