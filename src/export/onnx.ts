// ONNX messages, written with our protobuf writer (protobuf.ts). Field numbers are those of
// onnx.proto (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto), listed here once:
//
//   ModelProto        ir_version 1, producer_name 2, producer_version 3, domain 4,
//                     model_version 5, doc_string 6, graph 7, opset_import 8, metadata_props 14
//   OperatorSetIdProto domain 1, version 2
//   StringStringEntryProto key 1, value 2
//   GraphProto        node 1, name 2, initializer 5, doc_string 10, input 11, output 12
//   NodeProto         input 1, output 2, name 3, op_type 4, attribute 5, doc_string 6, domain 7
//   AttributeProto    name 1, f 2, i 3, s 4, floats 7, ints 8, type 20
//                     (AttributeType FLOAT 1, INT 2, STRING 3, FLOATS 6, INTS 7)
//   TensorProto       dims 1, data_type 2, name 8, raw_data 9 (little-endian)
//                     (DataType FLOAT 1)
//   ValueInfoProto    name 1, type 2
//   TypeProto         tensor_type 1;  TypeProto.Tensor elem_type 1, shape 2
//   TensorShapeProto  dim 1;  Dimension dim_value 1, dim_param 2
import { ProtoMessage } from './protobuf.ts';

/** IR version 8 is the one that came with opset 17 (ONNX 1.12). */
export const IR_VERSION = 8;
export const OPSET = 17;

export const DataType = { FLOAT: 1 } as const;
const AttrType = { FLOAT: 1, INT: 2, STRING: 3, FLOATS: 6, INTS: 7 } as const;

export type AttrValue = number | string | { ints: readonly number[] } | { floats: readonly number[] } | { float: number };

/** Attributes by name: a plain number is an INT, `{ float }` a FLOAT. */
export type Attrs = Record<string, AttrValue>;

function attribute(name: string, v: AttrValue): ProtoMessage {
  const m = new ProtoMessage().string(1, name);
  if (typeof v === 'number') return m.int(3, v).int(20, AttrType.INT);
  if (typeof v === 'string') return m.string(4, v).int(20, AttrType.STRING);
  if ('float' in v) return m.float(2, v.float).int(20, AttrType.FLOAT);
  if ('ints' in v) {
    for (const i of v.ints) m.int(8, i);
    return m.int(20, AttrType.INTS);
  }
  for (const f of v.floats) m.float(7, f);
  return m.int(20, AttrType.FLOATS);
}

export interface OnnxNode {
  op: string;
  name: string;
  inputs: readonly string[];
  outputs: readonly string[];
  attrs?: Attrs;
}

export function nodeProto(n: OnnxNode): ProtoMessage {
  const m = new ProtoMessage();
  for (const i of n.inputs) m.string(1, i);
  for (const o of n.outputs) m.string(2, o);
  m.string(3, n.name).string(4, n.op);
  for (const [k, v] of Object.entries(n.attrs ?? {})) m.message(5, attribute(k, v));
  return m;
}

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** A float32 initializer; `data` is referenced, not copied (on little-endian machines). */
export function floatTensor(name: string, dims: readonly number[], data: Float32Array): ProtoMessage {
  const count = dims.reduce((a, b) => a * b, 1);
  if (count !== data.length) throw new RangeError(`tensor ${name}: dims [${dims}] hold ${count} values, got ${data.length}`);
  let bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (!littleEndian) {
    bytes = new Uint8Array(data.byteLength);
    const v = new DataView(bytes.buffer);
    data.forEach((x, i) => v.setFloat32(4 * i, x, true));
  }
  const m = new ProtoMessage();
  for (const d of dims) m.int(1, d);
  return m.int(2, DataType.FLOAT).string(8, name).bytesField(9, bytes);
}

/** A dimension: a number, or a name for a symbolic one (e.g. 'batch'). */
export type Dim = number | string;

export function tensorValueInfo(name: string, elemType: number, dims: readonly Dim[]): ProtoMessage {
  const shape = new ProtoMessage();
  for (const d of dims) shape.message(1, typeof d === 'number' ? new ProtoMessage().int(1, d) : new ProtoMessage().string(2, d));
  const tensor = new ProtoMessage().int(1, elemType).message(2, shape);
  return new ProtoMessage().string(1, name).message(2, new ProtoMessage().message(1, tensor));
}

export interface OnnxGraph {
  name: string;
  nodes: readonly OnnxNode[];
  initializers: readonly ProtoMessage[];
  inputs: readonly ProtoMessage[];
  outputs: readonly ProtoMessage[];
  doc?: string;
}

export interface OnnxModel {
  graph: OnnxGraph;
  producer: { name: string; version: string };
  doc?: string;
  /** metadata_props, in order. */
  metadata: readonly [string, string][];
}

/** The whole file as chunks in order (write them in turn). */
export function modelProto(model: OnnxModel): Uint8Array[] {
  const g = new ProtoMessage();
  for (const n of model.graph.nodes) g.message(1, nodeProto(n));
  g.string(2, model.graph.name);
  for (const t of model.graph.initializers) g.message(5, t);
  if (model.graph.doc) g.string(10, model.graph.doc);
  for (const i of model.graph.inputs) g.message(11, i);
  for (const o of model.graph.outputs) g.message(12, o);

  const m = new ProtoMessage()
    .int(1, IR_VERSION)
    .string(2, model.producer.name)
    .string(3, model.producer.version)
    .int(5, 1);
  if (model.doc) m.string(6, model.doc);
  m.message(7, g);
  m.message(8, new ProtoMessage().string(1, '').int(2, OPSET));
  for (const [k, v] of model.metadata) m.message(14, new ProtoMessage().string(1, k).string(2, v));
  return m.chunks();
}
