// gemmSegNT (wasm/gemm.ts): C = A B^T with A [M, K] and B [N, K] made of segments along K (the filter gradient read
// where the images lie), on both builds of the kernels, against a float64 reference and bit for bit against gemm()
// with B transposed on the same matrices in rows; any rows of C alone give the same bits. The gaps between segments
// and C hold NaN, so a read outside a segment, or a C that was read, would show. Segments of 3 and 7 floats take the
// packing's one-at-a-time path, 4 and 16 its transposes, and 260 crosses the KC blocks of 256 mid-segment. gemm's A in
// rows times 1 is packed by the same transposes, and gives the bits of the same A packed from its columns.
import { describe, expect, it } from 'vitest';
import { loadKernels, relaxedSimd, type KernelVariant } from '../../src/wasm/kernels.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';

/** Rows [rows, K] as segments along K: column k at ((k / s) seg + r s + k % s), seg = rows s + gap (the gap NaN). */
function segmented(m: Float32Array, rows: number, K: number, s: number, gap: number): { data: Float32Array; seg: number } {
  const seg = rows * s + gap, count = Math.ceil(K / s);
  const data = new Float32Array(count * seg).fill(NaN);
  for (let r = 0; r < rows; r++) for (let k = 0; k < K; k++) data[Math.floor(k / s) * seg + r * s + (k % s)] = m[r * K + k]!;
  return { data, seg };
}

const bits = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

describe('gemmSegNT', () => {
  // M, N, K, A's segment, B's segment (K: one segment of rows)
  const shapes: [number, number, number, number, number][] = [
    [1, 1, 1, 1, 1], [5, 13, 21, 7, 3], [8, 9, 64, 4, 16], [37, 27, 300, 3, 300], [12, 40, 1040, 260, 1040], [64, 64, 1024, 256, 256],
    [6, 2100, 520, 260, 520], [130, 20, 64, 4, 4], [9, 5, 0, 4, 4],
  ];
  for (const variant of ['single', 'single-fma'] as KernelVariant[]) {
    it(`${variant}: the float64 sums, gemm's bits, and the same bits for rows alone (${shapes.map((s) => s.join('x')).join(', ')})`, async () => {
      if (variant.endsWith('fma') && !(await relaxedSimd())) return; // no relaxed SIMD here: the plain case covers the kernel
      const memory = new WebAssembly.Memory({ initial: 512 });
      const k = await loadKernels(memory, variant);
      for (const [M, N, K, sA, sB] of shapes) {
        const what = `${M}x${N}x${K} (segments ${sA}, ${sB})`;
        const rng = makeRng(M * 7919 + N * 31 + K);
        const a = uniformF32(rng, M * K), b = uniformF32(rng, N * K);
        const A = segmented(a, M, K, sA, 5), B = segmented(b, N, K, sB, 3);
        let top = k.heapBase();
        const place = (n: number): number => { const p = top; top += Math.ceil((Math.max(n, 1) * 4) / 64) * 64 + 64; return p; };
        const pa = place(a.length), pb = place(b.length), pA = place(A.data.length), pB = place(B.data.length);
        const pC = place(M * N), pG = place(M * N), pR = place(M * N), pS = place(k.gemmScratchBytes() / 4);
        const aT = new Float32Array(M * K);
        for (let m = 0; m < M; m++) for (let q = 0; q < K; q++) aT[q * M + m] = a[m * K + q]!;
        const paT = place(aT.length), pT = place(M * N);
        expect(top, 'the test fits its memory').toBeLessThan(memory.buffer.byteLength);
        const f = new Float32Array(memory.buffer);
        f.set(a, pa / 4); f.set(b, pb / 4); f.set(A.data, pA / 4); f.set(B.data, pB / 4); f.set(aT, paT / 4);
        for (const p of [pC, pG, pR, pT]) f.fill(NaN, p / 4, p / 4 + M * N);
        k.gemmSegNT(M, N, K, pA, sA, A.seg, pB, sB, B.seg, pC, N, pS);
        k.gemm(M, N, K, pa, K, 0, pb, K, 1, pG, N, 1, 0, pS);
        k.gemm(M, N, K, paT, M, 1, pb, K, 1, pT, N, 1, 0, pS); // A packed from columns: the same values as from rows
        // Rows [4, M) and [0, 4) in two calls (A's pointer moved by 4 rows within each segment).
        if (M > 4) k.gemmSegNT(M - 4, N, K, pA + 4 * sA * 4, sA, A.seg, pB, sB, B.seg, pR + 4 * N * 4, N, pS);
        k.gemmSegNT(Math.min(M, 4), N, K, pA, sA, A.seg, pB, sB, B.seg, pR, N, pS);
        const c = f.slice(pC / 4, pC / 4 + M * N);
        expect(c.every(Number.isFinite), `${what}: finite`).toBe(true);
        expect(bits(c), `${what}: gemm's bits`).toEqual(bits(f.slice(pG / 4, pG / 4 + M * N)));
        expect(bits(f.slice(pR / 4, pR / 4 + M * N)), `${what}: rows alone`).toEqual(bits(c));
        expect(bits(f.slice(pT / 4, pT / 4 + M * N)), `${what}: gemm with A transposed`).toEqual(bits(c));
        for (let m = 0; m < M; m++) {
          for (let n = 0; n < N; n++) {
            let ref = 0, mag = 0;
            for (let q = 0; q < K; q++) { ref += a[m * K + q]! * b[n * K + q]!; mag += Math.abs(a[m * K + q]! * b[n * K + q]!); }
            const err = Math.abs(c[m * N + n]! - ref);
            if (!(err <= 2 * (K + 2) * 2 ** -24 * mag + 1e-30)) expect.fail(`${what}: C[${m}, ${n}] = ${c[m * N + n]}, float64 ${ref}`);
          }
        }
      }
    });
  }
});
