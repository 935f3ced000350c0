// GEMM: C = alpha * op(A) op(B) + beta * C, float32, row-major, optionally batched.
// Shapes: op(A) [M, K] (A stored [M, K], or [K, M] with transA); op(B) [K, N] (B stored
// [K, N], or [N, K] with transB); C [M, N]. Batched: leading dimension `batch` on all three.
// What linear layers need: y = x W^T (transB), dx = dy W, dW += dy^T x (transA, beta = 1).
//
// Operands larger than one storage binding are split into sub-GEMMs on row ranges (with
// leading dimensions and offsets in the uniforms); splits along K accumulate with beta = 1.
import code from '../../shaders/gemm.wgsl?raw';
import { check, VtError } from '../errors.ts';
import type { Constants, Gpu, Kernel } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { gemmConfig } from '../gpu/tune.ts';
import { u32s } from '../gpu/uniforms.ts';

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
  check(a.length === b.length && b.length === c.length && (a.length === 2 || a.length === 3), what, () => `A, B, C must all be rank 2 or all rank 3 (batched); got [${a}], [${b}], [${c}]`);
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

interface SubGemm { m0: number; m1: number; n0: number; n1: number; k0: number; k1: number }

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

const KERNEL = { name: 'gemm', code } as const;

export function gemm(gpu: Gpu, a: Tensor, b: Tensor, c: Tensor, p: GemmParams = {}): void {
  const d = gemmDims(a.shape, b.shape, c.shape, p);
  const { batch, M, N, K } = d;
  if (M === 0 || N === 0) return;
  const alpha = p.alpha ?? 1;
  const beta = p.beta ?? 0;
  const cfg = gemmConfig(gpu);
  const lda = p.transA ? M : K, ldb = p.transB ? K : N, ldc = N;
  const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
  const maxElems = Math.floor(gpu.maxBindingBytes / 4);
  // The vec4 kernels (blocked4 for B, blocked4t for B^T) need 16-byte aligned rows and
  // offsets and no transposed A; otherwise the scalar blocked kernel runs.
  const variant = (m: number, n: number, k: number, offA: number, offB: number) => {
    const aligned = !p.transA && k % 4 === 0 && lda % 4 === 0 && ldb % 4 === 0 && offA % 4 === 0 && offB % 4 === 0;
    const vecEntry = p.transB ? 'blocked4t' : n % 4 === 0 ? 'blocked4' : null;
    const entry = cfg.entry === 'blocked4' ? (aligned && vecEntry ? vecEntry : 'blocked') : cfg.entry;
    const c = cfg.constants;
    const colsPerInvocation = entry === 'blocked4' ? 8 : entry === 'blocked4t' ? 4 : c.TN!;
    const tile = entry === 'tiled' ? 64 : entry === 'tiled8' ? 128 : 0;
    const groups: [number, number] = tile
      ? [Math.ceil(n / tile), Math.ceil(m / tile)]
      : [Math.ceil(n / (colsPerInvocation * c.WGX!)), Math.ceil(m / (c.TM! * c.WGY!))];
    const constants: Constants = entry.startsWith('blocked4')
      ? { TM: c.TM!, WGX: c.WGX!, WGY: c.WGY! }
      : { ...c, TRANS_A: p.transA ? 1 : 0, TRANS_B: p.transB ? 1 : 0 };
    return { kernel: { ...KERNEL, entryPoint: entry } as Kernel, constants, groups };
  };

  if (K <= MAX_K && Math.max(a.size, b.size, c.size) <= maxElems) {
    const { kernel, constants, groups: [gx, gy] } = variant(M, N, K, 0, 0);
    gpu.dispatch({
      kernel, constants, bindings: [a, b, c],
      uniforms: [...u32s(M, N, K, lda, ldb, ldc, 0, 0, 0, M * K, K * N, M * N), ['f32', alpha], ['f32', beta]],
      workgroups: [gx, gy, batch],
    });
    return;
  }
  // Leave room for the alignment slack of each view. Batched GEMMs that need splitting run
  // item by item (each item's operands start at its batch offset).
  const plan = planSplits(d, p, maxElems - align);
  for (let item = 0; item < batch; item++) for (const s of plan) {
    const [ba, bb, bc] = [item * M * K, item * K * N, item * M * N];
    const aStart = ba + (p.transA ? s.k0 * lda + s.m0 : s.m0 * lda + s.k0);
    const aEnd = ba + (p.transA ? (s.k1 - 1) * lda + s.m1 : (s.m1 - 1) * lda + s.k1);
    const bStart = bb + (p.transB ? s.n0 * ldb + s.k0 : s.k0 * ldb + s.n0);
    const bEnd = bb + (p.transB ? (s.n1 - 1) * ldb + s.k1 : (s.k1 - 1) * ldb + s.n1);
    const cStart = bc + s.m0 * ldc + s.n0, cEnd = bc + (s.m1 - 1) * ldc + s.n1;
    const va = alignedView(gpu, a, aStart, aEnd, align);
    const vb = alignedView(gpu, b, bStart, bEnd, align);
    const vc = alignedView(gpu, c, cStart, cEnd, align);
    const { kernel, constants, groups: [gx, gy] } = variant(s.m1 - s.m0, s.n1 - s.n0, s.k1 - s.k0, va.off, vb.off);
    gpu.dispatch({
      kernel, constants, bindings: [va.t, vb.t, vc.t],
      uniforms: [...u32s(s.m1 - s.m0, s.n1 - s.n0, s.k1 - s.k0, lda, ldb, ldc, va.off, vb.off, vc.off, 0, 0, 0), ['f32', alpha], ['f32', s.k0 > 0 ? 1 : beta]],
      workgroups: [gx, gy, 1],
    });
  }
}

/** A view covering elements [start, end) whose first element is aligned down; returns the offset inside it. */
function alignedView(gpu: Gpu, t: Tensor, start: number, end: number, align: number): { t: Tensor; off: number } {
  const s = Math.floor(start / align) * align;
  return { t: gpu.view(t, s, [end - s]), off: start - s };
}
