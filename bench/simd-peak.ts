// The machine's wasm SIMD peak, the ceiling our CPU kernels are read against
// (`npm run bench -- cpu`): a register-blocked loop of f32x4 multiply-adds on 12 independent
// accumulators (8 FLOPs per lane group), compiled here by AssemblyScript with the engine's flags,
// run on 1 thread and on N worker threads at once (each its own instance). Median of the runs
// (~0.2 s each, 5 to 15) that reach 0.7 of the best. Two forms, as the engine's two builds multiply-add (wasm/gemm.ts madd): 'fma',
// relaxed SIMD's f32x4.relaxed_madd (one fused instruction where the CPU has FMA), and
// 'mul-add', a multiply then an add (base SIMD has no fused multiply-add).
import { Worker } from 'node:worker_threads';
import { median } from './timing.ts';

const CHAINS = 12;

export type PeakForm = 'fma' | 'mul-add';

/** AssemblyScript source of the loop: `peak(iters)` runs CHAINS chains of multiply-adds per iteration. */
function source(form: PeakForm): string {
  const decl = Array.from({ length: CHAINS }, (_, i) => `let a${i} = f32x4.splat(${1 + i * 0.01});`).join('\n  ');
  const step = (i: number): string => (form === 'fma' ? `f32x4.relaxed_madd(a${i}, m, c)` : `f32x4.add(f32x4.mul(a${i}, m), c)`);
  const body = Array.from({ length: CHAINS }, (_, i) => `a${i} = ${step(i)};`).join('\n    ');
  const sum = Array.from({ length: CHAINS }, (_, i) => `a${i}`).reduce((s, a) => `f32x4.add(${s}, ${a})`);
  return `export function peak(iters: i32): f32 {
  const m = f32x4.splat(0.9999999);
  const c = f32x4.splat(0.0000001);
  ${decl}
  for (let i = 0; i < iters; i++) {
    ${body}
  }
  const s = ${sum};
  return f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1) + f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3);
}
`;
}

/** The loop's module; the 'fma' form needs a runtime with relaxed SIMD (src/wasm/kernels.ts relaxedSimd). */
export async function compilePeak(form: PeakForm = 'mul-add'): Promise<Uint8Array> {
  const { default: asc } = await import('assemblyscript/asc');
  const enable = form === 'fma' ? ['simd', 'relaxed-simd'] : ['simd'];
  const r = await asc.compileString(source(form), { optimizeLevel: 3, runtime: 'stub', noAssert: true, enable });
  if (!r.binary || r.error) throw new Error(`simd peak: AssemblyScript failed: ${r.error?.message ?? ''} ${r.stderr.toString()}`);
  return r.binary;
}

// Each worker: instantiate, calibrate the iterations to ~0.2 s, wait for the start signal (so the
// threads overlap), then time 5 runs and post the GFLOP/s of each.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { exports } = new WebAssembly.Instance(new WebAssembly.Module(workerData.binary), {});
const flops = (it) => it * ${CHAINS} * 8;
// Warm up first: V8 starts wasm on its baseline compiler and swaps in the optimised code only
// for later calls, so one long call could be timed on the baseline code (10x slower).
const warm = performance.now();
while (performance.now() - warm < 300) exports.peak(1 << 12);
let iters = 1 << 16;
for (;;) { const t0 = performance.now(); exports.peak(iters); if (performance.now() - t0 > 50) break; iters *= 2; }
iters *= 4;
// Runs on the baseline code (a tenth of the rate) still happen at times: up to 15 runs, until 5 reach 0.7 of the best.
parentPort.once('message', () => {
  const all = [];
  const fast = () => all.filter((g) => g >= 0.7 * Math.max(...all));
  while (all.length < 15 && (all.length < 5 || fast().length < 5)) {
    const t0 = performance.now();
    exports.peak(iters);
    all.push(flops(iters) / ((performance.now() - t0) / 1e3) / 1e9);
  }
  parentPort.postMessage(fast());
});
parentPort.postMessage('ready');
`;

/** GFLOP/s summed over `threads` threads running the loop at once (medians per thread). */
export async function simdPeakGflops(binary: Uint8Array, threads: number): Promise<number> {
  const workers = Array.from({ length: threads }, () => new Worker(WORKER, { eval: true, workerData: { binary } }));
  try {
    await Promise.all(workers.map((w) => new Promise<void>((ok, fail) => { w.once('message', () => ok()); w.once('error', fail); })));
    const results = await Promise.all(workers.map((w) => new Promise<number[]>((ok, fail) => {
      w.once('message', (m: number[]) => ok(m));
      w.once('error', fail);
      w.postMessage('go');
    })));
    return results.reduce((s, r) => s + median(r), 0);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
