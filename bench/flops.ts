// FLOPs of one training step per image, counted over the convolutions and linear layers (2 per
// multiply-add; batch norm, ReLU, pooling and the optimiser are left out: well under 1% of a
// ResNet's): forward, the filter gradient, and the data gradient of every layer but those
// reading the input batch, which needs none.
import { inferShapes, type ModelSpec, type NodeSpec } from '../src/nn/graph.ts';

/** Sums each conv or linear layer's FLOPs (all its passes), divided by what `saving` says that layer's algorithm saves. */
function stepFlops(spec: ModelSpec, saving: (n: NodeSpec) => number): number {
  const shapes = inferShapes(spec);
  let flops = 0;
  spec.nodes.forEach((n, i) => {
    if (n.op !== 'conv' && n.op !== 'linear') return;
    const x = shapes[n.in]!, y = shapes[i]!;
    const macs = n.op === 'conv' ? y[0]! * y[1]! * y[2]! * x[0]! * n.k * n.k : n.out * x[0]!;
    const passes = n.in === 0 ? 2 : 3;
    flops += (2 * macs * passes) / saving(n);
  });
  return flops;
}

export function trainingFlopsPerImage(spec: ModelSpec): number {
  return stepFlops(spec, () => 1);
}

/**
 * The fewest FLOPs per image any of our wasm kernels could spend on a training step: the count
 * above, with every pass of every 3x3 stride-1 convolution at F(4x4, 3x3)'s 4x fewer
 * multiply-adds (wasm/winograd4.ts; its transforms and edge tiles left out, and the filter
 * gradient, which runs F(2x2, 3x3)'s 2.25x, counted at 4x too). At the SIMD peak this is the most
 * images/s the wasm path could reach: a ceiling the measured step is read against.
 */
export function fewestFlopsPerImage(spec: ModelSpec): number {
  return stepFlops(spec, (n) => (n.op === 'conv' && n.k === 3 && n.stride === 1 ? 4 : 1));
}
