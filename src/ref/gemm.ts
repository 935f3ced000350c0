// float64 reference: C = alpha op(A) op(B) + beta C, row-major (see src/ops/gemm.ts).
export interface GemmRefParams { M: number; N: number; K: number; transA?: boolean; transB?: boolean; alpha?: number; beta?: number }

export function gemm(a: ArrayLike<number>, b: ArrayLike<number>, c: ArrayLike<number> | null, p: GemmRefParams): Float64Array {
  const { M, N, K } = p;
  const alpha = p.alpha ?? 1, beta = p.beta ?? 0;
  const out = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) {
        const av = p.transA ? a[k * M + m]! : a[m * K + k]!;
        const bv = p.transB ? b[n * K + k]! : b[k * N + n]!;
        s += av * bv;
      }
      out[m * N + n] = alpha * s + (beta !== 0 && c ? beta * c[m * N + n]! : 0);
    }
  }
  return out;
}

/**
 * Gradients of C = op(A) op(B) (alpha 1, beta 0): dA = dC op(B)^T, dB = op(A)^T dC, returned
 * in A's and B's stored layouts.
 */
export function gemmBackward(a: ArrayLike<number>, b: ArrayLike<number>, dc: ArrayLike<number>, p: GemmRefParams): [Float64Array, Float64Array] {
  const { M, N, K } = p;
  const da = new Float64Array(M * K);
  const db = new Float64Array(K * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      const g = dc[m * N + n]!;
      for (let k = 0; k < K; k++) {
        const ai = p.transA ? k * M + m : m * K + k;
        const bi = p.transB ? n * K + k : k * N + n;
        da[ai] += g * b[bi]!;
        db[bi] += g * a[ai]!;
      }
    }
  }
  return [da, db];
}
