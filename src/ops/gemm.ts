// GEMM: C = alpha * op(A) op(B) + beta * C, float32, row-major, optionally batched.
// Shapes: op(A) [M, K] (A stored [M, K], or [K, M] with transA); op(B) [K, N] (B stored
// [K, N], or [N, K] with transB); C [M, N]. Batched: leading dimension `batch` on all three.
// What linear layers need: y = x W^T (transB), dx = dy W, dW += dy^T x (transA, beta = 1).
//
// Operands larger than one storage binding are split into sub-GEMMs on row ranges (with
// leading dimensions and offsets in the uniforms); splits along K accumulate with beta = 1.
import code from '../../shaders/gemm.wgsl?raw';
import type { Constants, Gpu, Kernel } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { gemmConfig } from '../gpu/tune.ts';
import { u32s } from '../gpu/uniforms.ts';
import { type GemmParams, MAX_K, gemmDims, planSplits } from '../shapes/gemm.ts';

// The shape rules and the split plan live in src/shapes/gemm.ts; re-exported for the ops namespace.
export type { GemmDims, GemmParams } from '../shapes/gemm.ts';
export { MAX_K, gemmDims, planSplits } from '../shapes/gemm.ts';

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
