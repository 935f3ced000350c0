// Shape rules of GEMM (C = alpha * op(A) op(B) + beta * C, row-major, optionally batched): params,
// dims, and the plan that splits a GEMM into sub-GEMMs fitting a binding size and a K limit.
// Pure: shared by the WebGPU kernels (src/ops/gemm.ts) and the wasm engine.
import { check, VtError } from '../errors.ts';

export interface GemmParams {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  /** 0 overwrites C (its old contents are never read), 1 accumulates into C. */
  beta?: number;
}

export interface GemmDims { batch: number; M: number; N: number; K: number }

/** Dimensions from the tensors' shapes (rank 2, or rank 3 with a shared batch). */
export function gemmDims(a: readonly number[], b: readonly number[], c: readonly number[], p: GemmParams = {}): GemmDims {
  const what = 'gemm';
  check(a.length === b.length && b.length === c.length && (a.length === 2 || a.length === 3), what,
    () => `A, B, C must all be rank 2 or all rank 3 (batched); got [${a}], [${b}], [${c}]`);
  const r = a.length;
  const batch = r === 3 ? a[0]! : 1;
  check(r === 2 || (b[0] === batch && c[0] === batch), what, () => `batch sizes differ: ${a[0]}, ${b[0]}, ${c[0]}`);
  const [a0, a1] = [a[r - 2]!, a[r - 1]!];
  const [b0, b1] = [b[r - 2]!, b[r - 1]!];
  const M = p.transA ? a1 : a0;
  const K = p.transA ? a0 : a1;
  const Kb = p.transB ? b1 : b0;
  const N = p.transB ? b0 : b1;
  check(K === Kb, what, () => `inner dimensions differ: op(A) is ${M}x${K}, op(B) is ${Kb}x${N} (transA=${!!p.transA}, transB=${!!p.transB})`);
  check(c[r - 2] === M && c[r - 1] === N, what, () => `C is [${c}], expected [${r === 3 ? `${batch}, ` : ''}${M}, ${N}]`);
  return { batch, M, N, K };
}

/** One sub-GEMM of a split: rows [m0, m1) of op(A) and C, columns [n0, n1) of op(B) and C, K range [k0, k1). */
export interface SubGemm { m0: number; m1: number; n0: number; n1: number; k0: number; k1: number }

/** Chunks of [0, n) with at most `max` each (at least 1 element per chunk). */
function ranges(n: number, max: number): [number, number][] {
  const size = Math.max(1, Math.floor(max));
  const out: [number, number][] = [];
  for (let s = 0; s < n; s += size) out.push([s, Math.min(n, s + size)]);
  return out;
}

/**
 * The longest K one dispatch may reduce. llvmpipe silently ends a shader invocation after
 * 65,535 loop iterations (all loops summed) and returns a partial sum, with no error; the
 * scalar kernel loops K times. Longer reductions are split into K-chunks that accumulate
 * (beta = 1) in a fixed order, on every adapter, so results do not depend on the device.
 */
export const MAX_K = 16384;

/**
 * Splits a GEMM so every operand's bound rows fit in `maxElems` (one storage binding):
 * A's bound range is rows m (or k with transA) of its row length, and likewise for B and C;
 * and so no chunk reduces more than `maxK` (a multiple of 4, keeping vec4 alignment).
 */
export function planSplits(d: GemmDims, p: GemmParams, maxElems: number, maxK = MAX_K): SubGemm[] {
  const { M, N, K } = d;
  // Rows of the stored matrix each split dimension contributes, times the row length.
  let mMax = Math.floor(maxElems / N);
  if (!p.transA) mMax = Math.min(mMax, Math.floor(maxElems / K));
  let nMax = N;
  if (p.transB) nMax = Math.floor(maxElems / K);
  let kMax = K;
  if (p.transA) kMax = Math.min(kMax, Math.floor(maxElems / M));
  if (!p.transB) kMax = Math.min(kMax, Math.floor(maxElems / N));
  kMax = Math.min(kMax, maxK);
  if (kMax < K && kMax > 4) kMax -= kMax % 4;
  if (mMax < 1 || nMax < 1 || kMax < 1) {
    throw new VtError('too-large', `gemm ${M}x${N}x${K}: a single row is larger than one storage binding (${maxElems} floats)`);
  }
  const out: SubGemm[] = [];
  for (const [k0, k1] of ranges(K, kMax)) for (const [m0, m1] of ranges(M, mMax)) for (const [n0, n1] of ranges(N, nMax)) out.push({ m0, m1, n0, n1, k0, k1 });
  return out;
}
