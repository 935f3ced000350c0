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
