// A model is described once, as a list of nodes in topological order (node 0 is the input
// batch). Each node names its inputs by index. Forward walks the list; backward walks it in
// reverse (no tape). Shapes here exclude the batch dimension.
import { VtError } from '../errors.ts';
import { conv2dShape } from '../shapes/conv2d.ts';
import { pool2dShape } from '../shapes/pool.ts';
import type { LrnParams } from '../shapes/lrn.ts';

export type NodeSpec =
  | { op: 'input' }
  | { op: 'conv'; name: string; in: number; cout: number; k: number; stride: number; pad: number; bias: boolean }
  | { op: 'linear'; name: string; in: number; out: number; bias: boolean }
  | { op: 'bn'; name: string; in: number }
  | { op: 'relu'; in: number }
  | { op: 'maxpool'; in: number; k: number; stride: number; pad: number }
  | { op: 'avgpool'; in: number; k: number; stride: number; pad: number }
  | { op: 'gap'; in: number }
  | { op: 'lrn'; in: number; params: LrnParams }
  | { op: 'dropout'; in: number; p: number }
  | { op: 'add'; a: number; b: number }
  | { op: 'flatten'; in: number };

export interface ModelSpec {
  name: string;
  /** [C, H, W] of one input image. */
  input: readonly [number, number, number];
  classes: number;
  nodes: NodeSpec[];
}

/** The node indices a node reads. */
export function inputsOf(n: NodeSpec): number[] {
  if (n.op === 'input') return [];
  if (n.op === 'add') return [n.a, n.b];
  return [n.in];
}

/** Builds a node list; each method returns the new node's index. */
export class GraphBuilder {
  readonly nodes: NodeSpec[] = [{ op: 'input' }];
  private names = new Set<string>();
  readonly input = 0;

  private push(n: NodeSpec): number {
    for (const i of inputsOf(n)) {
      if (i < 0 || i >= this.nodes.length) throw new VtError('bad-shape', `model graph: node ${this.nodes.length} reads node ${i}, which does not exist yet`);
    }
    if ('name' in n) {
      if (this.names.has(n.name)) throw new VtError('bad-shape', `model graph: two layers are named ${n.name}`);
      this.names.add(n.name);
    }
    this.nodes.push(n);
    return this.nodes.length - 1;
  }
  conv(x: number, name: string, cout: number, k: number, o: { stride?: number; pad?: number; bias?: boolean } = {}): number {
    return this.push({ op: 'conv', name, in: x, cout, k, stride: o.stride ?? 1, pad: o.pad ?? 0, bias: o.bias ?? true });
  }
  linear(x: number, name: string, out: number, bias = true): number { return this.push({ op: 'linear', name, in: x, out, bias }); }
  bn(x: number, name: string): number { return this.push({ op: 'bn', name, in: x }); }
  relu(x: number): number { return this.push({ op: 'relu', in: x }); }
  maxpool(x: number, k: number, stride: number, pad = 0): number { return this.push({ op: 'maxpool', in: x, k, stride, pad }); }
  avgpool(x: number, k: number, stride: number, pad = 0): number { return this.push({ op: 'avgpool', in: x, k, stride, pad }); }
  gap(x: number): number { return this.push({ op: 'gap', in: x }); }
  lrn(x: number, params: LrnParams): number { return this.push({ op: 'lrn', in: x, params }); }
  dropout(x: number, p: number): number { return this.push({ op: 'dropout', in: x, p }); }
  add(a: number, b: number): number { return this.push({ op: 'add', a, b }); }
  flatten(x: number): number { return this.push({ op: 'flatten', in: x }); }
}

const eq = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/** Per-node output shape without the batch dimension; throws a clear error where shapes do not fit. */
export function inferShapes(spec: ModelSpec): number[][] {
  const shapes: number[][] = [];
  spec.nodes.forEach((n, i) => {
    const s = (j: number) => shapes[j]!;
    const where = `${spec.name} node ${i} (${n.op}${'name' in n ? ` ${n.name}` : ''})`;
    const need4 = (j: number): [number, number, number] => {
      const x = s(j);
      if (x.length !== 3) throw new VtError('bad-shape', `${where}: needs a [C, H, W] input, got [${x}]`);
      return [x[0]!, x[1]!, x[2]!];
    };
    switch (n.op) {
      case 'input': shapes.push([...spec.input]); break;
      case 'conv': {
        const [c, h, w] = need4(n.in);
        shapes.push(conv2dShape([1, c, h, w], [n.cout, c, n.k, n.k], { stride: n.stride, pad: n.pad }).slice(1));
        break;
      }
      case 'linear': {
        const x = s(n.in);
        if (x.length !== 1) throw new VtError('bad-shape', `${where}: needs a flat [F] input (add a flatten or gap), got [${x}]`);
        shapes.push([n.out]);
        break;
      }
      case 'maxpool': case 'avgpool': {
        const [c, h, w] = need4(n.in);
        shapes.push(pool2dShape([1, c, h, w], { kernel: n.k, stride: n.stride, pad: n.pad }).slice(1));
        break;
      }
      case 'gap': shapes.push([need4(n.in)[0]]); break;
      case 'flatten': shapes.push([s(n.in).reduce((a, b) => a * b, 1)]); break;
      case 'add':
        if (!eq(s(n.a), s(n.b))) throw new VtError('bad-shape', `${where}: adds [${s(n.a)}] and [${s(n.b)}]`);
        shapes.push([...s(n.a)]);
        break;
      case 'lrn': need4(n.in); shapes.push([...s(n.in)]); break;
      default: shapes.push([...s(n.in)]);
    }
  });
  return shapes;
}
