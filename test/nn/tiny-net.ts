// A tiny model with every layer kind the real models use (for whole-model checks).
import { GraphBuilder, type ModelSpec } from '../../src/nn/graph.ts';
import { ALEXNET_LRN } from '../../src/shapes/lrn.ts';

export function tinyNet(): ModelSpec {
  const g = new GraphBuilder();
  let x = g.relu(g.bn(g.conv(g.input, 'c1', 4, 3, { pad: 1, bias: false }), 'bn1'));
  const y = g.bn(g.conv(g.relu(g.conv(x, 'c2', 4, 3, { pad: 1 })), 'c3', 4, 3, { pad: 1, bias: false }), 'bn3');
  x = g.relu(g.add(y, x));
  x = g.lrn(g.maxpool(x, 3, 2, 1), ALEXNET_LRN);
  x = g.avgpool(x, 2, 1);
  const head = g.linear(g.dropout(g.flatten(x), 0.3), 'fc1', 6);
  g.linear(g.relu(head), 'fc2', 3);
  return { name: 'tiny', input: [2, 6, 6], classes: 3, nodes: g.nodes };
}
