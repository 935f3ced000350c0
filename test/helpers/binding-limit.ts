import type { Gpu } from '../../src/gpu/runtime.ts';

/**
 * Runs `fn` with ops seeing a smaller largest-binding size, so the code paths that split
 * tensors larger than one storage binding (128 MiB here) run on small test arrays.
 */
export async function withBindingLimit<T>(gpu: Gpu, bytes: number, fn: () => Promise<T>): Promise<T> {
  const before = gpu.maxBindingBytes;
  gpu.maxBindingBytes = bytes;
  try {
    return await fn();
  } finally {
    gpu.maxBindingBytes = before;
  }
}
