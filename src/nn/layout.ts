// Parameter layout: every parameter tensor of a model is a view at an offset of ONE flat
// float32 buffer (the gradient buffer has the same layout). Offsets are aligned to 64 floats
// (256 bytes, WebGPU's storage offset alignment) so each tensor can be bound on its own; the
// padding stays zero in weights and gradients. BN running statistics are not trained: they
// live in a second flat "state" buffer with the same rules.
import { makeRng } from '../rng.ts';
import { type ModelSpec, inferShapes } from './graph.ts';

export const ALIGN_FLOATS = 64;

export type ParamRole = 'weight' | 'bias' | 'bn-gamma' | 'bn-beta';

export interface ParamTensor {
  name: string;
  node: number;
  role: ParamRole;
  shape: number[];
  offset: number;
  length: number;
  /** LARS adapts this tensor's rate (lambda); otherwise lambda = 1. */
  adapt: boolean;
  /** Weight decay applies to this tensor. */
  decay: boolean;
  /** Inputs per output (for He initialisation). */
  fanIn: number;
  /** A bias under biasTrust 'layer': the index in `params` of its layer's weight, whose LARS trust ratio it takes. */
  trustFrom?: number;
}

export interface StateTensor { name: string; node: number; role: 'running-mean' | 'running-var'; offset: number; length: number }

export interface Layout {
  params: ParamTensor[];
  /** Length of the flat buffers, padding included. */
  paramFloats: number;
  /** Number of parameters (no padding): what papers count. */
  paramCount: number;
  state: StateTensor[];
  stateFloats: number;
  /** Per-node output shapes without the batch dimension. */
  shapes: number[][];
}

export interface LayoutOptions {
  /** Whether biases and BN gamma/beta get LARS adaptation (default false, as common practice). */
  adaptBiasAndBn?: boolean;
  /** Whether biases and BN gamma/beta are weight-decayed (default false). */
  decayBiasAndBn?: boolean;
  /**
   * The LARS rate of a conv or linear bias that is not adapted itself: 'global' (default) the
   * global rate, as TensorFlow's exclude_from_layer_adaptation; 'layer' its layer weight's trust
   * ratio (trustFrom), so the bias moves at its layer's pace. BN gamma/beta keep the global rate.
   */
  biasTrust?: 'global' | 'layer';
}

const align = (n: number) => Math.ceil(n / ALIGN_FLOATS) * ALIGN_FLOATS;

export function layoutOf(spec: ModelSpec, opts: LayoutOptions = {}): Layout {
  const shapes = inferShapes(spec);
  const params: ParamTensor[] = [];
  const state: StateTensor[] = [];
  let off = 0, soff = 0;
  const other = { adapt: opts.adaptBiasAndBn ?? false, decay: opts.decayBiasAndBn ?? false };
  const add = (node: number, name: string, role: ParamRole, shape: number[], fanIn: number) => {
    const length = shape.reduce((a, b) => a * b, 1);
    const flags = role === 'weight' ? { adapt: true, decay: true } : other;
    // A bias right after its layer's weight (same node) may take that weight's trust ratio.
    const layerWeight = params.length - 1;
    const borrow = role === 'bias' && !flags.adapt && opts.biasTrust === 'layer'
      && params[layerWeight]?.node === node && params[layerWeight]?.role === 'weight';
    params.push({ name, node, role, shape, offset: off, length, fanIn, ...flags, ...(borrow ? { trustFrom: layerWeight } : {}) });
    off = align(off + length);
  };
  spec.nodes.forEach((n, i) => {
    if (n.op === 'conv') {
      const cin = shapes[n.in]![0]!;
      add(i, `${n.name}.weight`, 'weight', [n.cout, cin, n.k, n.k], cin * n.k * n.k);
      if (n.bias) add(i, `${n.name}.bias`, 'bias', [n.cout], cin * n.k * n.k);
    } else if (n.op === 'linear') {
      const fin = shapes[n.in]![0]!;
      add(i, `${n.name}.weight`, 'weight', [n.out, fin], fin);
      if (n.bias) add(i, `${n.name}.bias`, 'bias', [n.out], fin);
    } else if (n.op === 'bn') {
      const c = shapes[n.in]![0]!;
      add(i, `${n.name}.gamma`, 'bn-gamma', [c], 1);
      add(i, `${n.name}.beta`, 'bn-beta', [c], 1);
      for (const role of ['running-mean', 'running-var'] as const) {
        state.push({ name: `${n.name}.${role}`, node: i, role, offset: soff, length: c });
        soff = align(soff + c);
      }
    }
  });
  return {
    params, state, shapes,
    paramFloats: Math.max(off, ALIGN_FLOATS),
    paramCount: params.reduce((s, p) => s + p.length, 0),
    stateFloats: Math.max(soff, ALIGN_FLOATS),
  };
}

/**
 * He (Kaiming) normal initialisation from a seeded generator: weights ~ N(0, 2 / fanIn),
 * biases and BN beta 0, BN gamma 1. Each tensor has its own stream (seed, tensor index), so
 * the same seed gives the same weights on every machine whatever the order of work.
 */
export function initParams(layout: Layout, seed: number): Float32Array {
  const w = new Float32Array(layout.paramFloats);
  layout.params.forEach((p, idx) => {
    const view = w.subarray(p.offset, p.offset + p.length);
    if (p.role === 'weight') {
      const rng = makeRng(seed * 1_000_003 + idx);
      const std = Math.sqrt(2 / p.fanIn);
      for (let i = 0; i < view.length; i++) view[i] = std * rng.normal();
    } else if (p.role === 'bn-gamma') view.fill(1);
  });
  return w;
}

/** Running mean 0 and running variance 1, as PyTorch starts them. */
export function initState(layout: Layout): Float32Array {
  const s = new Float32Array(layout.stateFloats);
  for (const t of layout.state) if (t.role === 'running-var') s.fill(1, t.offset, t.offset + t.length);
  return s;
}

/** A table of the parameter layout: name, shape, offset, count. */
export function summary(spec: ModelSpec, layout: Layout): string {
  const rows = layout.params.map((p) => `${p.name.padEnd(28)} ${`[${p.shape.join(', ')}]`.padEnd(22)} `
    + `@${String(p.offset).padStart(10)} ${String(p.length).padStart(10)}${p.adapt ? '' : '  (no LARS)'}${p.decay ? '' : ' (no decay)'}`);
  return [
    `${spec.name}: input [${spec.input.join(', ')}], ${spec.classes} classes`,
    ...rows,
    `parameters: ${layout.paramCount.toLocaleString('en-US')} in ${layout.params.length} tensors; `
      + `flat buffer ${layout.paramFloats.toLocaleString('en-US')} floats (${((layout.paramFloats * 4) / 2 ** 20).toFixed(1)} MiB)`,
  ].join('\n');
}
