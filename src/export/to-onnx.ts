// A trained model (src/nn: node list, flat weights, BN running statistics) as an ONNX graph
// (opset 17) for inference. Pure: no file system; the caller writes the returned chunks.
//
// Node by node (semantics of src/ops, each checked to be the ONNX op's):
//   conv     -> Conv (pads on all four sides, group 1) [+ its bias as Conv's B]
//   linear   -> Gemm (transB = 1: our weight is [out, in], as PyTorch's)
//   bn       -> BatchNormalization in inference form: running mean/var from the checkpoint,
//               epsilon BN_EPS (src/nn/model.ts)
//   relu     -> Relu;  add -> Add;  flatten -> Flatten (axis 1, row-major as ours)
//   maxpool  -> MaxPool (floor mode; padding never wins a max)
//   avgpool  -> AveragePool (count_include_pad 0: padding never counts, as ours)
//   gap      -> GlobalAveragePool + Flatten (ours yields [N, C], ONNX [N, C, 1, 1])
//   lrn      -> LRN (size, alpha, beta, bias = k; same formula, alpha divided by size in both;
//               for odd sizes the channel windows agree, even sizes are refused)
//   dropout  -> nothing: inference passes its input through
// The graph input is NCHW float32 with a symbolic batch dimension; the output is the logits.
import { type ModelSpec, type NodeSpec } from '../nn/graph.ts';
import { layoutOf } from '../nn/layout.ts';
import { BN_EPS } from '../nn/model.ts';
import { DataType, type OnnxNode, floatTensor, modelProto, tensorValueInfo } from './onnx.ts';
import type { ProtoMessage } from './protobuf.ts';
import { ExportError } from './errors.ts';

export const INPUT_NAME = 'input';
export const OUTPUT_NAME = 'logits';
export const BATCH_DIM = 'batch';

export interface ExportInput {
  spec: ModelSpec;
  /** The flat parameter buffer (layoutOf(spec)'s layout). */
  weights: Float32Array;
  /** The flat BN state buffer (running mean and variance). */
  bnState: Float32Array;
  /** metadata_props of the model, in order. */
  metadata: readonly [string, string][];
  doc?: string;
  producerVersion?: string;
}

const pair = (v: number): number[] => [v, v];

/** The ONNX file of a model, as chunks in order. */
export function exportOnnx(x: ExportInput): Uint8Array[] {
  const { spec } = x;
  const layout = layoutOf(spec);
  if (x.weights.length !== layout.paramFloats) {
    throw new ExportError('bad-checkpoint', `the weights have ${x.weights.length} floats, ${spec.name} needs ${layout.paramFloats}`);
  }
  if (x.bnState.length !== layout.stateFloats) {
    throw new ExportError('bad-checkpoint', `the BN state has ${x.bnState.length} floats, ${spec.name} needs ${layout.stateFloats}`);
  }
  const initializers: ProtoMessage[] = [];
  const nodes: OnnxNode[] = [];
  // The ONNX value holding each of our nodes' outputs (dropout reuses its input's).
  const value: string[] = [];
  const last = spec.nodes.length - 1;

  const param = (node: number, role: string): string => {
    const p = layout.params.find((q) => q.node === node && q.role === role);
    if (!p) throw new ExportError('unsupported', `${spec.name}: node ${node} has no ${role} in the layout`);
    initializers.push(floatTensor(p.name, p.shape, x.weights.subarray(p.offset, p.offset + p.length)));
    return p.name;
  };
  const state = (node: number, role: 'running-mean' | 'running-var'): string => {
    const s = layout.state.find((q) => q.node === node && q.role === role)!;
    initializers.push(floatTensor(s.name, [s.length], x.bnState.subarray(s.offset, s.offset + s.length)));
    return s.name;
  };

  spec.nodes.forEach((n, i) => {
    if (n.op === 'input') {
      value.push(INPUT_NAME);
      return;
    }
    if (n.op === 'dropout') {
      value.push(value[n.in]!);
      return;
    }
    const out = i === last ? OUTPUT_NAME : `${nodeName(n, i)}.out`;
    value.push(out);
    nodes.push(...onnxNodes(n, i, out, value, param, state));
  });
  if (value[last] !== OUTPUT_NAME) {
    // The model ends in a dropout (none of ours does): name its input's value the output.
    nodes.push({ op: 'Identity', name: 'output', inputs: [value[last]!], outputs: [OUTPUT_NAME] });
  }

  const [c, h, w] = spec.input;
  return modelProto({
    graph: {
      name: spec.name,
      nodes,
      initializers,
      inputs: [tensorValueInfo(INPUT_NAME, DataType.FLOAT, [BATCH_DIM, c, h, w])],
      outputs: [tensorValueInfo(OUTPUT_NAME, DataType.FLOAT, [BATCH_DIM, spec.classes])],
    },
    producer: { name: 'volunteer-trainer', version: x.producerVersion ?? '0' },
    doc: x.doc,
    metadata: x.metadata,
  });
}

function nodeName(n: NodeSpec, i: number): string {
  return 'name' in n ? n.name : `${n.op}${i}`;
}

function onnxNodes(
  n: NodeSpec, i: number, out: string, value: readonly string[],
  param: (node: number, role: string) => string,
  state: (node: number, role: 'running-mean' | 'running-var') => string,
): OnnxNode[] {
  const name = nodeName(n, i);
  const one = (op: string, inputs: string[], attrs?: OnnxNode['attrs']): OnnxNode[] => [{ op, name, inputs, outputs: [out], attrs }];
  switch (n.op) {
    case 'input': case 'dropout': return [];
    case 'conv': {
      const inputs = [value[n.in]!, param(i, 'weight')];
      if (n.bias) inputs.push(param(i, 'bias'));
      return one('Conv', inputs, {
        kernel_shape: { ints: pair(n.k) }, strides: { ints: pair(n.stride) },
        pads: { ints: [n.pad, n.pad, n.pad, n.pad] }, dilations: { ints: [1, 1] }, group: 1,
      });
    }
    case 'linear': {
      const inputs = [value[n.in]!, param(i, 'weight')];
      if (n.bias) inputs.push(param(i, 'bias'));
      return one('Gemm', inputs, { transB: 1, alpha: { float: 1 }, beta: { float: 1 } });
    }
    case 'bn':
      return one(
        'BatchNormalization', [value[n.in]!, param(i, 'bn-gamma'), param(i, 'bn-beta'), state(i, 'running-mean'), state(i, 'running-var')],
        { epsilon: { float: BN_EPS } },
      );
    case 'relu': return one('Relu', [value[n.in]!]);
    case 'add': return one('Add', [value[n.a]!, value[n.b]!]);
    case 'flatten': return one('Flatten', [value[n.in]!], { axis: 1 });
    case 'maxpool':
      return one('MaxPool', [value[n.in]!], {
        kernel_shape: { ints: pair(n.k) }, strides: { ints: pair(n.stride) }, pads: { ints: [n.pad, n.pad, n.pad, n.pad] }, ceil_mode: 0,
      });
    case 'avgpool':
      return one('AveragePool', [value[n.in]!], {
        kernel_shape: { ints: pair(n.k) }, strides: { ints: pair(n.stride) }, pads: { ints: [n.pad, n.pad, n.pad, n.pad] }, ceil_mode: 0,
        count_include_pad: 0,
      });
    case 'gap': {
      const pooled = `${name}.pooled`;
      return [
        { op: 'GlobalAveragePool', name, inputs: [value[n.in]!], outputs: [pooled] },
        { op: 'Flatten', name: `${name}.flatten`, inputs: [pooled], outputs: [out], attrs: { axis: 1 } },
      ];
    }
    case 'lrn': {
      const p = n.params;
      if (p.size % 2 !== 1) {
        throw new ExportError('unsupported', `node ${i} is an LRN of size ${p.size}: `
          + "ONNX's LRN centres an even window one channel later than ours (PyTorch's), so only odd sizes export exactly");
      }
      return one('LRN', [value[n.in]!], { size: p.size, alpha: { float: p.alpha }, beta: { float: p.beta }, bias: { float: p.k } });
    }
  }
}
