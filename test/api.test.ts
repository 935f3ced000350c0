// The public entry module: someone's own script gets a device, runs an op and reads it back.
import { describe, expect, it } from 'vitest';
import { getDevice, ops, ref, modelByName, layoutOf } from '../src/index.ts';

describe('public API (src/index.ts)', () => {
  it('runs an op on a device and matches its reference', async () => {
    const gpu = await getDevice();
    try {
      const a = Float32Array.from([1, 2, 3, 4, 5, 6]), b = Float32Array.from([1, 0, 0, 1, 1, 1]);
      const c = gpu.empty([2, 2]);
      ops.gemm(gpu, gpu.upload(a, [2, 3]), gpu.upload(b, [3, 2]), c);
      expect([...(await gpu.readF32(c))]).toEqual([...ref.gemm.gemm(a, b, null, { M: 2, N: 2, K: 3 })]);
      expect(layoutOf(modelByName('resnet50')).paramCount).toBe(25_557_032);
    } finally {
      gpu.destroy();
    }
  });
});
