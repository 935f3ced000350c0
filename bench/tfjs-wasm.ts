// TF.js with its WebAssembly backend (XNNPACK kernels, SIMD) in Node, for the `cpu` benchmark's
// peer. Node resolves tfjs-core and the wasm backend to their CommonJS builds, one instance.
import * as tf from '@tensorflow/tfjs-core';
import { getThreadsCount, setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { conv2dBackwardFilter } from '../src/ref/conv2d.ts';
import { makeRng, uniformF32 } from '../src/rng.ts';
import { registerGradients } from './tfjs-webgpu.ts';

type Info = tf.TensorInfo;
type Pads = [[number, number], [number, number], [number, number], [number, number]];

/** Runs a kernel of the wasm backend directly (inside another kernel). */
function kernel(name: string, backend: tf.KernelBackend, inputs: Record<string, Info>, attrs: Record<string, unknown>): Info {
  const k = tf.getKernel(name, 'wasm');
  if (!k) throw new Error(`TF.js wasm has no ${name} kernel`);
  return k.kernelFunc({ inputs, backend, attrs: attrs as tf.NamedAttrMap }) as Info;
}

/**
 * TF.js 4.22's wasm backend has no Conv2DBackpropFilter kernel, so a CNN cannot train on it
 * as shipped. The peer gets one built from its OWN fastest kernel, the XNNPACK convolution:
 *   dW[ky, kx, ci, co] = sum_{n, oy, ox} xpad[n, s oy + ky, s ox + kx, ci] dy[n, oy, ox, co]
 * is a 'valid' convolution of xpad seen as [ci, Hp, Wp, n] (batch ci, channels n) with dy seen
 * as a [oh, ow, n, co] filter dilated by the stride s: the classic trick, same FLOPs as the
 * forward pass. (Its Conv3DBackpropFilterV2 on depth-1 volumes gives wrong results for stride 2.)
 */
function registerConv2dBackpropFilter(): void {
  tf.registerKernel({
    kernelName: 'Conv2DBackpropFilter', backendName: 'wasm',
    kernelFunc: ({ inputs, backend: b, attrs }) => {
      const backend = b as tf.KernelBackend;
      const { x, dy } = inputs as { x: Info; dy: Info };
      const a = attrs as unknown as {
        strides: number | [number, number]; pad: number | string | Pads; filterShape: [number, number, number, number]; dataFormat?: string;
      };
      if (a.dataFormat && a.dataFormat !== 'NHWC') throw new Error(`Conv2DBackpropFilter shim: NHWC only, got ${a.dataFormat}`);
      const [sh, sw] = typeof a.strides === 'number' ? [a.strides, a.strides] : a.strides;
      let pads: Pads;
      if (Array.isArray(a.pad)) pads = a.pad;
      else if (typeof a.pad === 'number') pads = [[0, 0], [a.pad, a.pad], [a.pad, a.pad], [0, 0]];
      else if (a.pad === 'valid') pads = [[0, 0], [0, 0], [0, 0], [0, 0]];
      else throw new Error(`Conv2DBackpropFilter shim: pad ${String(a.pad)} is not supported (explicit, a number or 'valid')`);
      const [kh, kw, ci, co] = a.filterShape;
      const temps: Info[] = [];
      const t = (i: Info) => (temps.push(i), i);
      const padded = t(kernel('PadV2', backend, { x }, { paddings: pads, constantValue: 0 }));
      const xt = t(kernel('Transpose', backend, { x: padded }, { perm: [3, 1, 2, 0] })); // [ci, Hp, Wp, n]
      const f = t(kernel('Transpose', backend, { x: dy }, { perm: [1, 2, 0, 3] })); // [oh, ow, n, co]
      let out = t(kernel('Conv2D', backend, { x: xt, filter: f }, {
        strides: [1, 1], pad: 'valid', dataFormat: 'NHWC', dilations: [sh, sw], dimRoundingMode: undefined,
      }));
      // Rows past the last window (when (Hp - kh) is not a multiple of the stride) are not taps.
      if (out.shape[1] !== kh || out.shape[2] !== kw) out = t(kernel('Slice', backend, { x: out }, { begin: [0, 0, 0, 0], size: [ci, kh, kw, co] }));
      const dw = kernel('Transpose', backend, { x: out }, { perm: [1, 2, 0, 3] }); // [kh, kw, ci, co]
      for (const i of temps) backend.disposeData(i.dataId);
      return dw;
    },
  });
}

export async function tfjsWasm(): Promise<{ threads: number }> {
  const dir = dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm'));
  setWasmPaths(`${dir}/`);
  await registerGradients();
  await tf.setBackend('wasm');
  await tf.ready();
  if (tf.getBackend() !== 'wasm') throw new Error(`TF.js did not start its wasm backend (got ${tf.getBackend()})`);
  if (!tf.getKernel('Conv2DBackpropFilter', 'wasm')) {
    registerConv2dBackpropFilter();
    checkShim();
  }
  return { threads: getThreadsCount() };
}

/** The shim against the float64 reference on an awkward shape (stride 2, pad 1): a wrong peer would make the ratio meaningless. */
function checkShim(): void {
  const [n, ci, h, w, co, k] = [2, 3, 7, 6, 5, 3];
  const oh = Math.floor((h + 2 - k) / 2) + 1, ow = Math.floor((w + 2 - k) / 2) + 1;
  const rng = makeRng(5);
  const x = uniformF32(rng, n * ci * h * w), dy = uniformF32(rng, n * co * oh * ow);
  const want = conv2dBackwardFilter(Float64Array.from(x), Float64Array.from(dy), [n, ci, h, w], [co, ci, k, k], { stride: 2, pad: 1 });
  const got = tf.tidy(() => {
    const X = tf.transpose(tf.tensor4d(x, [n, ci, h, w]), [0, 2, 3, 1]);
    const DY = tf.transpose(tf.tensor4d(dy, [n, co, oh, ow]), [0, 2, 3, 1]);
    const dw = tf.engine().runKernel('Conv2DBackpropFilter', { x: X, dy: DY }, {
      strides: [2, 2], pad: [[0, 0], [1, 1], [1, 1], [0, 0]], dataFormat: 'NHWC', filterShape: [k, k, ci, co],
    }) as tf.Tensor4D;
    return tf.transpose(dw, [3, 2, 0, 1]).dataSync();
  });
  let err = 0, scale = 0;
  for (let i = 0; i < want.length; i++) { err = Math.max(err, Math.abs(got[i]! - want[i]!)); scale = Math.max(scale, Math.abs(want[i]!)); }
  if (!(err <= 1e-4 * Math.max(1, scale))) throw new Error(`the Conv2DBackpropFilter shim for TF.js wasm is wrong: max error ${err} (scale ${scale})`);
}
