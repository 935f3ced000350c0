// gemmPanels (wasm/gemm.ts): the GEMM on operands their producers packed (Winograd's transforms) gives
// gemm()'s bits on the same matrices in rows, on both builds of the kernels: the same KC blocks of the
// reduction, the same micro-kernel, the same edge tiles. Padding rows of A and columns of B hold NaN
// and C starts as NaN, so a padded lane that leaked, or a C that was read, would show.
import { describe, expect, it } from 'vitest';
import { loadKernels, relaxedSimd, type KernelVariant } from '../../src/wasm/kernels.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';

const MR = 4, NR = 8;

/** A [M, K] rows as gemmPanels' A: 4-row panels, row i column k at ((i / 4) K + k) 4 + i % 4; padding NaN. */
function panelsA(a: Float32Array, M: number, K: number): Float32Array {
  const out = new Float32Array(Math.ceil(M / MR) * MR * K).fill(NaN);
  for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) out[(Math.floor(i / MR) * K + k) * MR + (i % MR)] = a[i * K + k]!;
  return out;
}

/** B [K, N] rows as gemmPanels' B: 8-column panels, row k column j at ((j / 8) K + k) 8 + j % 8; padding NaN. */
function panelsB(b: Float32Array, K: number, N: number): Float32Array {
  const out = new Float32Array(Math.ceil(N / NR) * NR * K).fill(NaN);
  for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) out[(Math.floor(j / NR) * K + k) * NR + (j % NR)] = b[k * N + j]!;
  return out;
}

const bits = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

describe('gemmPanels has gemm\'s bits', () => {
  const shapes: [number, number, number][] = [
    [1, 1, 1], [4, 8, 16], [5, 13, 7], [16, 256, 16], [37, 245, 17], [3, 9, 300], [130, 20, 257], [64, 256, 64], [6, 4, 0],
  ];
  for (const variant of ['single', 'single-fma'] as KernelVariant[]) {
    it(`${variant}: ${shapes.map((s) => s.join('x')).join(', ')}`, async () => {
      if (variant.endsWith('fma') && !(await relaxedSimd())) return; // no relaxed SIMD here: the plain case covers the kernel
      const memory = new WebAssembly.Memory({ initial: 256 });
      const k = await loadKernels(memory, variant);
      for (const [M, N, K] of shapes) {
        const rng = makeRng(M * 7919 + N * 31 + K);
        const a = uniformF32(rng, M * K), b = uniformF32(rng, K * N);
        const pa = panelsA(a, M, K), pb = panelsB(b, K, N);
        // Layout: [a][b][pa][pb][c rows][c panels][gemm scratch], 64-byte aligned.
        let top = k.heapBase();
        const place = (n: number): number => { const p = top; top += Math.ceil((n * 4) / 64) * 64; return p; };
        const pA = place(a.length), pB = place(b.length), pPa = place(pa.length), pPb = place(pb.length);
        const pC1 = place(M * N), pC2 = place(M * N), pS = place(k.gemmScratchBytes() / 4);
        const f = new Float32Array(memory.buffer);
        f.set(a, pA / 4); f.set(b, pB / 4); f.set(pa, pPa / 4); f.set(pb, pPb / 4);
        f.fill(NaN, pC1 / 4, pC1 / 4 + M * N); f.fill(NaN, pC2 / 4, pC2 / 4 + M * N);
        k.gemm(M, N, K, pA, K, 0, pB, N, 0, pC1, N, 1, 0, pS);
        k.gemmPanels(M, N, K, pPa, pPb, pC2, N, pS);
        const c1 = f.slice(pC1 / 4, pC1 / 4 + M * N), c2 = f.slice(pC2 / 4, pC2 / 4 + M * N);
        expect(c2.every(Number.isFinite), `${M}x${N}x${K}: finite`).toBe(true);
        expect(bits(c2), `${M}x${N}x${K}`).toEqual(bits(c1));
      }
    });
  }
});

// gemmPanelsRun and gemmNTRun: Winograd's per-position GEMMs as one call (one command for a thread). Each of `count`
// products at its own steps must have the bits of the single call on the same operands, and nothing between the outputs
// (the gaps, NaN) may be written; a count of 0 writes nothing.
describe('the GEMM runs have the single calls\' bits', () => {
  const shapes: [number, number, number][] = [[4, 8, 16], [5, 13, 7], [37, 20, 17], [16, 130, 36]];
  for (const variant of ['single', 'single-fma'] as KernelVariant[]) {
    it(`${variant}: 3 products a run, gaps untouched; ${shapes.map((s) => s.join('x')).join(', ')}`, async () => {
      if (variant.endsWith('fma') && !(await relaxedSimd())) return;
      const memory = new WebAssembly.Memory({ initial: 256 });
      const k = await loadKernels(memory, variant);
      const f = new Float32Array(memory.buffer);
      for (const [M, N, K] of shapes) {
        const rng = makeRng(M * 31 + N * 7 + K);
        const runs = 3, gap = 16;
        const aN = Math.ceil(M / MR) * MR * K, bN = Math.ceil(N / NR) * NR * K;
        let top = k.heapBase();
        const place = (n: number): number => { const p = top; top += Math.ceil((n * 4) / 64) * 64; return p; };
        // Operands at steps of their size plus a gap (panels for gemmPanels; rows A [M, K], B [N, K] for gemmNT).
        const aStep = Math.ceil(((aN + gap) * 4) / 64) * 64, bStep = Math.ceil(((bN + gap) * 4) / 64) * 64;
        const cStep = Math.ceil(((M * N + gap) * 4) / 64) * 64;
        const pa = place((aStep / 4) * runs), pb = place((bStep / 4) * runs);
        const c1 = place((cStep / 4) * runs), c2 = place((cStep / 4) * runs), tile = place(MR * NR);
        f.set(uniformF32(rng, (aStep / 4) * runs), pa / 4);
        f.set(uniformF32(rng, (bStep / 4) * runs), pb / 4);
        const check = (what: string, one: (i: number, c: number) => void, run: (c: number, count: number) => void): void => {
          f.fill(NaN, c1 / 4, c1 / 4 + (cStep / 4) * runs); f.fill(NaN, c2 / 4, c2 / 4 + (cStep / 4) * runs);
          for (let i = 0; i < runs; i++) one(i, c1 + i * cStep);
          run(c2, 0);
          expect(f.slice(c2 / 4, c2 / 4 + (cStep / 4) * runs).every(Number.isNaN), `${what} ${M}x${N}x${K}: count 0 writes nothing`).toBe(true);
          run(c2, runs);
          const r1 = f.slice(c1 / 4, c1 / 4 + (cStep / 4) * runs), r2 = f.slice(c2 / 4, c2 / 4 + (cStep / 4) * runs);
          expect(r2.subarray(0, M * N).every(Number.isFinite), `${what} ${M}x${N}x${K}: finite`).toBe(true);
          expect(bits(r2), `${what} ${M}x${N}x${K}`).toEqual(bits(r1)); // NaN gaps compare as their bits
        };
        check('gemmPanelsRun', (i, c) => k.gemmPanels(M, N, K, pa + i * aStep, pb + i * bStep, c, N, tile),
          (c, count) => k.gemmPanelsRun(M, N, K, pa, aStep, pb, bStep, c, cStep, N, tile, count));
        // gemmNT adds onto C with beta 1: start both from the same finite C.
        const check2 = (beta: number): void => check(`gemmNTRun beta ${beta}`, (i, c) => {
          f.fill(0.5, c / 4, c / 4 + M * N);
          k.gemmNT(M, N, K, pa + i * aStep, K, pb + i * bStep, K, c, N, 1, beta);
        }, (c, count) => {
          for (let i = 0; i < count; i++) f.fill(0.5, (c + i * cStep) / 4, (c + i * cStep) / 4 + M * N);
          k.gemmNTRun(M, N, K, pa, K, pb, K, c, N, 1, beta, aStep, bStep, cStep, count);
        });
        check2(0);
        check2(1);
      }
    });
  }
});
