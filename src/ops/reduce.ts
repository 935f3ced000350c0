// Deterministic reductions: sum and sum of squares of a whole tensor, and per-segment sums of
// squares of flat buffers for LARS (each parameter tensor is a segment [offset, length] of the
// one flat parameter buffer; the same table serves the flat gradient buffer). f32 throughout,
// but tree-shaped (see shaders/reduce.wgsl), in two passes, never with atomics: the same
// inputs give the same bits on every run.
import code from '../../shaders/reduce.wgsl?raw';
import { check, VtError } from '../errors.ts';
import type { Gpu, Kernel } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import type { Scalar } from '../gpu/uniforms.ts';
import { bindingRanges } from './elementwise.ts';

const KERNEL: Kernel = { name: 'reduce', code };
const WG = 256;
const ITEMS = 16;
/** Elements per pass-1 workgroup (the shader's CH). */
const CH = WG * ITEMS;
const CONSTANTS = { WG, ITEMS };

/** One parameter tensor inside a flat buffer: [element offset, element count]. */
export type Segment = readonly [offset: number, length: number];

/** The shape function: segments u32 [S, 2] -> one result per segment, [S]. */
export function segmentCount(shape: readonly number[]): number {
  check(shape.length === 2 && shape[1] === 2, 'segments', () => `must be u32 [S, 2] (offset, length pairs), got ${shapeStr(shape)}`);
  return shape[0]!;
}

/** Uploads a segment table (once per model layout; uploading flushes recorded work). */
export function segmentTable(gpu: Gpu, segs: readonly Segment[]): Tensor {
  return gpu.upload(Uint32Array.from(segs.flat()), [segs.length, 2], 'segments');
}

function params(n: number, s: number, cap: number, sq: boolean, pbase = 0): Scalar[] {
  return [['u32', n], ['u32', s], ['u32', cap], ['u32', sq ? 1 : 0], ['u32', pbase]];
}

function dispatch(gpu: Gpu, entryPoint: string, uniforms: Scalar[], bindings: (Tensor | null)[], workgroups: number): void {
  gpu.dispatch1d({ kernel: { ...KERNEL, entryPoint }, constants: CONSTANTS, uniforms, bindings }, workgroups);
}

// segments u32 [S, 2], xs[i] f32 [n] (all the same size) -> outs[i] f32 [S]:
//   outs[i][s] = sum over j in [offset_s, offset_s + length_s) of xs[i][j]^2
// LARS passes [weights, grads] -> [||w||^2, ||g||^2] per tensor in one call, no readback.
// Segments must be disjoint; an empty one gives 0; one outside x (or, if segments overlap,
// one past the scratch capacity) gives NaN rather than a wrong number.
export function sumSquaresSegments(gpu: Gpu, segments: Tensor, xs: readonly Tensor[], outs: readonly Tensor[]): void {
  const what = 'sumSquaresSegments';
  const S = segmentCount(segments.shape);
  check(segments.dtype === 'u32', what, () => `segments must be u32, got ${segments.dtype}`);
  check(xs.length >= 1 && xs.length === outs.length, what, () => `${xs.length} inputs and ${outs.length} outputs (need one output per input)`);
  const n = xs[0]!.size;
  check(xs.every((x) => x.size === n && x.dtype === 'f32'), what, () => `inputs must be f32 of the same size: ${xs.map((x) => `${x.dtype} ${shapeStr(x.shape)}`).join(', ')}`);
  check(outs.every((o) => o.size === S), what, () => `each output must be [${S}], got ${outs.map((o) => shapeStr(o.shape)).join(', ')}`);
  if (n * 4 > gpu.maxBindingBytes) {
    throw new VtError('too-large', `${what}: a flat buffer of ${n} floats exceeds one storage binding (${gpu.maxBindingBytes} bytes): split the model's parameters into several flat buffers.`);
  }
  if (S === 0) return;
  // Disjoint in-range segments have at most ceil(len / CH) <= len / CH + 1 chunks each.
  const cap = Math.ceil(n / CH) + S;
  const prefix = gpu.empty([S + 1], 'u32', 'reduce.prefix');
  const partials = gpu.empty([cap], 'f32', 'reduce.partials');
  const u = params(n, S, cap, true);
  gpu.dispatch({ kernel: { ...KERNEL, entryPoint: 'segPrefix' }, constants: CONSTANTS, uniforms: u, bindings: [segments, null, prefix], workgroups: [1] });
  // One partials buffer serves every input: dispatches run in order.
  xs.forEach((x, i) => {
    dispatch(gpu, 'segPartials', u, [segments, x, null, prefix, partials], cap);
    dispatch(gpu, 'segFinish', u, [segments, null, null, prefix, partials, outs[i]!], S);
  });
  gpu.release(prefix, partials);
}

function wholeSum(gpu: Gpu, what: string, x: Tensor, out: Tensor, sq: boolean): void {
  check(x.dtype === 'f32' && out.size === 1, what, () => `needs f32 x and a [1] output, got ${x.dtype} x, out ${shapeStr(out.shape)}`);
  const ranges = bindingRanges(gpu, x.size);
  const total = ranges.reduce((a, [, n]) => a + Math.ceil(n / CH), 0);
  const partials = gpu.empty([Math.max(1, total)], 'f32', 'reduce.partials');
  let pbase = 0;
  for (const [s, n] of ranges) {
    const chunks = Math.ceil(n / CH);
    dispatch(gpu, 'wholePartials', params(n, 0, 0, sq, pbase), [null, gpu.view(x, s, [n]), null, null, partials], chunks);
    pbase += chunks;
  }
  dispatch(gpu, 'wholeFinish', params(0, total, 0, sq), [null, null, null, null, partials, out], 1);
  gpu.release(partials);
}

// x f32 [any] -> out [1] = sum of x
export function sum(gpu: Gpu, x: Tensor, out: Tensor): void {
  wholeSum(gpu, 'sum', x, out, false);
}

// x f32 [any] -> out [1] = sum of x^2
export function sumSquares(gpu: Gpu, x: Tensor, out: Tensor): void {
  wholeSum(gpu, 'sumSquares', x, out, true);
}
