// FLOPs of one training step per image, counted over the convolutions and linear layers (2 per
// multiply-add; batch norm, ReLU, pooling and the optimiser are left out: well under 1% of a
// ResNet's): forward, the filter gradient, and the data gradient of every layer but those
// reading the input batch, which needs none.
import { inferShapes, type ModelSpec } from '../src/nn/graph.ts';

export function trainingFlopsPerImage(spec: ModelSpec): number {
  const shapes = inferShapes(spec);
  let flops = 0;
  spec.nodes.forEach((n, i) => {
    if (n.op !== 'conv' && n.op !== 'linear') return;
    const x = shapes[n.in]!, y = shapes[i]!;
    const macs = n.op === 'conv' ? y[0]! * y[1]! * y[2]! * x[0]! * n.k * n.k : n.out * x[0]!;
    const passes = n.in === 0 ? 2 : 3;
    flops += 2 * macs * passes;
  });
  return flops;
}
