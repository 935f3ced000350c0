// Shape rule of the elementwise arithmetic ops (add, scale, axpy, fill): every operand has the
// same number of elements. Pure: shared by the WebGPU kernels (src/ops/eltwise.ts) and the wasm engine.
import { check } from '../errors.ts';

/** The shape function: every operand and the result have the same number of elements. */
export function eltwiseSize(...sizes: number[]): number {
  const n = sizes[0] ?? 0;
  check(sizes.every((s) => s === n), 'eltwise', () => `operand sizes differ: ${sizes.join(', ')}`);
  return n;
}
