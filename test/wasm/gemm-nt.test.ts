// gemmNT (wasm/gemm.ts, C = alpha A B^T + beta C: the gemm op's transB path and Winograd's filter-gradient GEMMs) in its
// exact order of operations, on the plain build (a multiply and an add, each rounded, which float32 arithmetic here
// reproduces; the -fma build differs only in fusing them). Every C value: four lane sums over k = 4q + l, each in q
// order; (l0 + l1) + (l2 + l3); the K % 4 last products added in k order; then alpha, then beta. The kernel's 4x2 blocks
// reduce their eight sums by shuffles, its edges (M % 4 rows, an odd last column) one value at a time: both must give
// these bits. C starts NaN where beta is 0 (it must not be read) and the columns past N (ldc > N) must stay untouched.
import { describe, expect, it } from 'vitest';
import { loadKernels } from '../../src/wasm/kernels.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';

const fr = Math.fround;

/** The value gemmNT computes for row i of A and row j of B (float32 at every step, as the plain build rounds). */
function expected(a: Float32Array, lda: number, b: Float32Array, ldb: number, i: number, j: number, K: number, alpha: number, beta: number,
  old: number): number {
  const K4 = K & ~3, s = [0, 0, 0, 0];
  for (let k = 0; k < K4; k++) s[k & 3] = fr(s[k & 3]! + fr(a[i * lda + k]! * b[j * ldb + k]!));
  let r = fr(fr(s[0]! + s[1]!) + fr(s[2]! + s[3]!));
  for (let k = K4; k < K; k++) r = fr(r + fr(a[i * lda + k]! * b[j * ldb + k]!));
  r = fr(fr(alpha) * r); // alpha and beta reach the kernel as float32
  return beta === 0 ? r : beta === 1 ? fr(old + r) : fr(fr(old * fr(beta)) + r);
}

describe('gemmNT keeps its order of operations (plain build)', () => {
  const shapes: [number, number, number][] = [[4, 2, 8], [4, 2, 5], [8, 6, 7], [7, 9, 13], [16, 16, 128], [5, 3, 1], [13, 17, 258], [1, 1, 3], [4, 4, 0]];
  const scalings: [number, number][] = [[1, 0], [1, 1], [0.7, 0.5], [-1.25, 1]];
  it(`${shapes.map((s) => s.join('x')).join(', ')}; alpha, beta ${scalings.map((s) => s.join('/')).join(', ')}`, async () => {
    const memory = new WebAssembly.Memory({ initial: 64 });
    const k = await loadKernels(memory, 'single');
    const f = new Float32Array(memory.buffer);
    const rng = makeRng(11);
    for (const [M, N, K] of shapes) {
      for (const [alpha, beta] of scalings) {
        const lda = K + 3, ldb = K + 1, ldc = N + 2;
        const a = uniformF32(rng, M * lda), b = uniformF32(rng, N * ldb), c0 = uniformF32(rng, M * ldc);
        if (beta === 0) c0.fill(NaN);
        const pa = k.heapBase(), pb = pa + Math.ceil((a.length * 4) / 64) * 64 + 64, pc = pb + Math.ceil((b.length * 4) / 64) * 64 + 64;
        f.set(a, pa / 4); f.set(b, pb / 4); f.set(c0, pc / 4);
        k.gemmNT(M, N, K, pa, lda, pb, ldb, pc, ldc, alpha, beta);
        const c = f.slice(pc / 4, pc / 4 + M * ldc);
        const want = Float32Array.from(c0);
        for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) want[i * ldc + j] = expected(a, lda, b, ldb, i, j, K, alpha, beta, c0[i * ldc + j]!);
        const what = `${M}x${N}x${K} alpha ${alpha} beta ${beta}`;
        expect(Array.from(new Uint32Array(c.buffer)), what).toEqual(Array.from(new Uint32Array(want.buffer)));
      }
    }
  });
});
