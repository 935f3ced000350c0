// Shared plumbing for elementwise ops over flat arrays: splits arrays larger than one storage
// binding (maxStorageBufferBindingSize, 128 MiB on llvmpipe) into aligned ranges, and folds
// the workgroup count to fit maxComputeWorkgroupsPerDimension.
import type { Gpu } from '../gpu/runtime.ts';

/** [start, count] element ranges, each fitting one binding; starts stay 256-byte aligned. */
export function bindingRanges(gpu: Gpu, n: number): [number, number][] {
  const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
  const maxElems = Math.floor(gpu.maxBindingBytes / 4 / align) * align;
  const out: [number, number][] = [];
  for (let s = 0; s < n; s += maxElems) out.push([s, Math.min(maxElems, n - s)]);
  if (out.length === 0) out.push([0, 0]);
  return out;
}
