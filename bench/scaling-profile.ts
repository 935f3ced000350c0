// What the scaling simulator needs to know about a model, read from its real spec
// (src/nn/models.ts) and parameter layout (src/nn/layout.ts): the bytes of the flat gradient
// buffer, the training FLOPs of one image, and, per parameter-owning layer, its gradient's
// bytes and the moment of the backward pass at which that gradient is complete.
//
// FLOPs count the multiply-adds of convolutions and linear layers (2 per multiply-add); BN,
// ReLU, pooling and adds are left out (memory-bound, a few % of ResNet-50's FLOPs). Backward
// costs 2x forward (input gradient + weight gradient), 1x for a layer that reads the input
// image (no input gradient). Backward walks the nodes in reverse (src/nn/graph.ts), so the
// gradient of node k is complete once every node >= k has run its backward: its ready
// fraction is the share of the backward FLOPs spent on nodes >= k.
import type { ModelSpec } from '../src/nn/graph.ts';
import { layoutOf } from '../src/nn/layout.ts';

/** One parameter-owning node (conv, linear, BN) of the flat gradient buffer. */
export interface LayerGrad {
  name: string;
  node: number;
  /** Bytes of its span of the flat gradient buffer (alignment padding included). */
  bytes: number;
  /** In (0, 1]: the share of the backward pass done when this layer's gradient is complete. */
  readyFraction: number;
}

export interface ModelProfile {
  model: string;
  input: readonly [number, number, number];
  paramCount: number;
  /** The flat gradient buffer the all-reduce moves: paramFloats * 4. */
  gradBytes: number;
  /** Forward FLOPs of one image. */
  forwardFlops: number;
  /** Backward FLOPs of one image. */
  backwardFlops: number;
  /** backward / (forward + backward): the share of a step's compute that backward takes. */
  backwardShare: number;
  /** In layout (forward) order; the backward pass completes them last to first. */
  layers: LayerGrad[];
}

export function modelProfile(spec: ModelSpec): ModelProfile {
  const layout = layoutOf(spec);
  const shapes = layout.shapes;
  const fwd = spec.nodes.map((n, i) => {
    if (n.op === 'conv') return 2 * shapes[i]!.reduce((a, b) => a * b, 1) * shapes[n.in]![0]! * n.k * n.k;
    if (n.op === 'linear') return 2 * shapes[n.in]![0]! * n.out;
    return 0;
  });
  const bwd = spec.nodes.map((n, i) => ('in' in n && n.in === 0 ? 1 : 2) * fwd[i]!);
  const backwardFlops = bwd.reduce((a, b) => a + b, 0);
  const forwardFlops = fwd.reduce((a, b) => a + b, 0);
  // Backward FLOPs of nodes >= k, for every k.
  const tail = new Array<number>(bwd.length + 1).fill(0);
  for (let k = bwd.length - 1; k >= 0; k--) tail[k] = tail[k + 1]! + bwd[k]!;
  const byNode = new Map<number, LayerGrad>();
  layout.params.forEach((p, i) => {
    const end = i + 1 < layout.params.length ? layout.params[i + 1]!.offset : layout.paramFloats;
    const bytes = (end - p.offset) * 4;
    const layer = byNode.get(p.node);
    if (layer) layer.bytes += bytes;
    else {
      byNode.set(p.node, {
        name: p.name.slice(0, p.name.lastIndexOf('.')), node: p.node, bytes, readyFraction: backwardFlops > 0 ? tail[p.node]! / backwardFlops : 1,
      });
    }
  });
  return {
    model: spec.name, input: spec.input, paramCount: layout.paramCount, gradBytes: layout.paramFloats * 4,
    forwardFlops, backwardFlops, backwardShare: backwardFlops / (forwardFlops + backwardFlops),
    layers: [...byNode.values()].sort((a, b) => a.node - b.node),
  };
}

/** FLOPs of one training image (forward + backward). */
export const trainFlops = (p: ModelProfile) => p.forwardFlops + p.backwardFlops;
