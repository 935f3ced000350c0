// The GPU runtime itself: errors that say what to do, bounded pool, pipeline cache keyed by
// kernel + constants (never shapes), folded dispatches past 65,535 workgroups.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDevice } from '../../src/gpu/device.ts';
import { BufferPool, sizeClass } from '../../src/gpu/pool.ts';
import { type Gpu, foldWorkgroups } from '../../src/gpu/runtime.ts';
import { VtError } from '../../src/errors.ts';
import { gemm } from '../../src/ops/gemm.ts';
import { reluForward } from '../../src/ops/relu.ts';

describe('GPU runtime', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await getDevice();
  });
  afterAll(() => gpu?.destroy());

  it('reports which adapter it found', () => {
    expect(gpu.info.platform).toBe('node');
    expect(gpu.info.description.length).toBeGreaterThan(0);
    expect(gpu.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  });

  it('rejects an unknown backend with a message naming the choices', async () => {
    const old = process.env.VT_GPU_BACKEND;
    process.env.VT_GPU_BACKEND = 'metal';
    try {
      await expect(getDevice()).rejects.toThrow(/VT_GPU_BACKEND=metal is not one of auto, opengles, swiftshader, vulkan/);
    } finally {
      if (old === undefined) delete process.env.VT_GPU_BACKEND;
      else process.env.VT_GPU_BACKEND = old;
    }
  });

  it('turns WebGPU validation errors into a typed error at the next check', async () => {
    const t = gpu.empty([4]);
    gpu.dispatch({ kernel: { name: 'broken', code: 'this is not WGSL' }, bindings: [t], uniforms: [], workgroups: [1] });
    let kind = '';
    try {
      await gpu.sync();
    } catch (e) {
      kind = e instanceof VtError ? e.kind : String(e);
    }
    expect(kind).toBe('gpu-validation');
    gpu.release(t);
  });

  it('caches pipelines by kernel and constants, not by shapes', async () => {
    const run = (m: number, n: number, k: number) => {
      const a = gpu.zeros([m, k]), b = gpu.zeros([k, n]), c = gpu.empty([m, n]);
      gemm(gpu, a, b, c);
      gpu.release(a, b, c);
    };
    run(8, 8, 8);
    await gpu.sync();
    const before = gpu.pipelineCount;
    run(16, 32, 24);
    run(40, 24, 12);
    await gpu.sync();
    expect(gpu.pipelineCount).toBe(before);
  });

  it('folds a dispatch of more than 65,535 workgroups into two dimensions', async () => {
    expect(foldWorkgroups(70_000, 65_535)).toEqual([35_000, 2]);
    const n = 65_535 * 256 + 300; // 65,537 workgroups of 256
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = (i % 7) - 3;
    const tx = gpu.upload(x), ty = gpu.empty([n]);
    reluForward(gpu, tx, ty);
    const y = await gpu.readF32(ty);
    let bad = -1;
    for (let i = 0; i < n && bad < 0; i++) if (y[i] !== Math.max(x[i]!, 0)) bad = i;
    expect(bad).toBe(-1);
    gpu.release(tx, ty);
  });

  it('keeps the pool within its byte budget, reusing buffers by size class', () => {
    const pool = new BufferPool(gpu.device, 1 << 20);
    const usage = GPUBufferUsage.STORAGE;
    const bufs = Array.from({ length: 8 }, () => pool.acquire(300_000, usage, 't'));
    for (const b of bufs) pool.release(b);
    expect(pool.stats().freeBytes).toBeLessThanOrEqual(1 << 20);
    const again = pool.acquire(290_000, usage, 't');
    expect(again.size).toBe(sizeClass(300_000));
    expect(pool.stats().freeBuffers).toBeLessThan(8);
    pool.release(again);
    pool.destroy();
  });
});
