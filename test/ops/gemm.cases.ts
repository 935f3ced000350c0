import type { Engine, TensorLike } from '../../src/backend/engine.ts';
import type { WebGpuEngine } from '../../src/backend/webgpu.ts';
import { planSplits } from '../../src/ops/gemm.ts';
import * as ref from '../../src/ref/gemm.ts';
import { GEMM_CANDIDATES, gemmConfig, setGemmConfig } from '../../src/gpu/tune.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import type { Gpu } from '../../src/gpu/runtime.ts';
import { assertClose } from '../helpers/compare.ts';
import type { OpCase, OpSuite } from './suite.ts';

interface Shape { M: number; N: number; K: number; transA?: boolean; transB?: boolean; alpha?: number; beta?: number; batch?: number }

// Sums of K products: float32 error grows with K, so atol scales with sqrt(K) (inputs in [-1, 1]).
const tol = (K: number) => ({ rtol: 1e-5, atol: 2e-6 * Math.sqrt(K) + 1e-6 });

async function check<T extends TensorLike>(e: Engine<T>, s: Shape, seed: number): Promise<void> {
  const rng = makeRng(seed);
  const batch = s.batch ?? 1;
  const lead = batch > 1 ? [batch] : [];
  const aShape = s.transA ? [s.K, s.M] : [s.M, s.K];
  const bShape = s.transB ? [s.N, s.K] : [s.K, s.N];
  const a = uniformF32(rng, batch * s.M * s.K), b = uniformF32(rng, batch * s.K * s.N), c0 = uniformF32(rng, batch * s.M * s.N);
  const ta = e.upload(a, [...lead, ...aShape]), tb = e.upload(b, [...lead, ...bShape]), tc = e.upload(c0, [...lead, s.M, s.N]);
  e.gemm(ta, tb, tc, s);
  const got = await e.readF32(tc);
  const expected = new Float64Array(batch * s.M * s.N);
  for (let i = 0; i < batch; i++) {
    const part = ref.gemm(a.subarray(i * s.M * s.K), b.subarray(i * s.K * s.N), c0.subarray(i * s.M * s.N), s);
    expected.set(part, i * s.M * s.N);
  }
  assertClose(got, expected, tol(s.K), `gemm ${JSON.stringify(s)}`);
  e.release(ta, tb, tc);
}

const shapes: Shape[] = [
  { M: 1, N: 1, K: 1 },
  { M: 7, N: 9, K: 13 },
  { M: 33, N: 17, K: 5, transA: true },
  { M: 5, N: 31, K: 19, transB: true },
  { M: 12, N: 10, K: 3, transA: true, transB: true },
  { M: 64, N: 64, K: 64 },
  { M: 65, N: 129, K: 70, beta: 1, alpha: 0.5 },
  { M: 3, N: 100, K: 257, transB: true, beta: -2 },
  { M: 4, N: 9, K: 6, batch: 3 },
  { M: 8, N: 1000, K: 200, transB: true }, // a classifier layer: logits = x W^T
  { M: 9, N: 12, K: 20 }, // vec4 path with N % 8 = 4 (clamped second quad)
  { M: 9, N: 30, K: 64, transB: true }, // blocked4t (x W^T) with N not a multiple of 4
  { M: 2, N: 7, K: 12, transB: true, batch: 3, beta: 1 },
  { M: 33, N: 64, K: 36, beta: 1, batch: 2 },
];

const shapeName = (s: Shape): string =>
  `${s.batch ? `b${s.batch} ` : ''}${s.M}x${s.N}x${s.K}${s.transA ? ' tA' : ''}${s.transB ? ' tB' : ''}${s.beta ? ` beta=${s.beta}` : ''}`;

/** Every shape with one WGSL kernel variant forced (GPU-only: the variants are the GPU's). */
function cases(label: string, pick: (gpu: Gpu) => void): OpCase[] {
  return shapes.map((s, i): OpCase => ({
    name: `${label} ${shapeName(s)}`,
    gpuOnly: true,
    async run(e: WebGpuEngine) {
      const before = gemmConfig(e.gpu);
      pick(e.gpu);
      try {
        await check(e, s, 100 + i);
      } finally {
        setGemmConfig(e.gpu, before);
      }
    },
  }));
}

export const suite: OpSuite = {
  op: 'gemm',
  cases: [
    // Every shape with whatever kernel the engine picks (on WebGPU: this adapter's tuned config).
    ...shapes.map((s, i): OpCase => ({ name: `engine's default ${shapeName(s)}`, run: (e) => check(e, s, 100 + i) })),
    ...cases('blocked4 4x8', (g) => setGemmConfig(g, GEMM_CANDIDATES[0]!)),
    ...cases('blocked4 8x8', (g) => setGemmConfig(g, GEMM_CANDIDATES[1]!)),
    ...cases('blocked 4x8', (g) => setGemmConfig(g, GEMM_CANDIDATES[2]!)),
    ...cases('blocked 8x4', (g) => setGemmConfig(g, GEMM_CANDIDATES[5]!)),
    ...cases('tiled', (g) => setGemmConfig(g, GEMM_CANDIDATES.find((c) => c.entry === 'tiled')!)),
    // The real-GPU kernel, forced here on the CPU driver (small K: llvmpipe's loop limit).
    ...cases('tiled8', (g) => setGemmConfig(g, GEMM_CANDIDATES.find((c) => c.entry === 'tiled8')!)),
    ...([
      { M: 3, N: 8, K: 70_001, transB: true },
      { M: 5, N: 12, K: 40_000 },
      { M: 2, N: 8, K: 20_000, batch: 2, beta: 1 },
    ] as Shape[]).map((s, i): OpCase => ({
      // llvmpipe silently stops an invocation after 65,535 loop iterations: long K is chunked.
      name: `long reduction K=${s.K}${s.transB ? ' tB' : ''}${s.batch ? ` b${s.batch}` : ''} is exact past llvmpipe's loop limit`,
      run: (e) => check(e, s, 500 + i),
    })),
    {
      name: 'operands larger than one binding are split (planSplits covers every block once)',
      gpuOnly: true,
      async run() {
        // Pure planning check at a tiny binding size, then the maths is exercised below.
        const d = { batch: 1, M: 10, N: 7, K: 9 };
        for (const p of [{}, { transA: true }, { transB: true }, { transA: true, transB: true }]) {
          const parts = planSplits(d, p, 20);
          const cover = new Map<string, number>();
          for (const s of parts) for (let m = s.m0; m < s.m1; m++) for (let n = s.n0; n < s.n1; n++) for (let k = s.k0; k < s.k1; k++) {
            const key = `${m},${n},${k}`;
            cover.set(key, (cover.get(key) ?? 0) + 1);
          }
          if (cover.size !== 10 * 7 * 9 || [...cover.values()].some((v) => v !== 1)) throw new Error(
            `planSplits ${JSON.stringify(p)} does not cover each (m,n,k) exactly once`,
          );
        }
      },
    },
    ...([
      { M: 50, N: 40, K: 30 },
      { M: 50, N: 40, K: 30, transA: true },
      { M: 50, N: 40, K: 30, transB: true, beta: 1 },
      { M: 37, N: 70, K: 33, transA: true, transB: true },
    ] as Shape[]).map((s, i): OpCase => ({
      name: `split into sub-GEMMs when operands exceed the binding limit ${s.M}x${s.N}x${s.K}${s.transA ? ' tA' : ''}${s.transB ? ' tB' : ''}`,
      gpuOnly: true,
      async run(e: WebGpuEngine) {
        const before = e.gpu.maxBindingBytes;
        e.gpu.maxBindingBytes = 4 * 640; // 640 floats: every operand above needs several pieces
        try {
          await check(e, s, 300 + i);
        } finally {
          e.gpu.maxBindingBytes = before;
        }
      },
    })),
  ],
};
