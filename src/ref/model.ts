// float64 reference of a whole model (src/nn): forward, summed softmax cross-entropy, and
// backward into a flat gradient with the same layout as the GPU model. The oracle for the
// whole-model gradient check; itself checked by finite differences (test/ref/model.test.ts).
import type { ModelSpec } from '../nn/graph.ts';
import { inputsOf } from '../nn/graph.ts';
import type { Layout } from '../nn/layout.ts';
import * as bn from './batchnorm.ts';
import * as bias from './bias.ts';
import * as conv from './conv2d.ts';
import * as dropout from './dropout.ts';
import { gemm, gemmBackward } from './gemm.ts';
import * as lrn from './lrn.ts';
import * as pool from './pool.ts';
import { reluBackward, reluForward } from './relu.ts';
import { softmaxXentBackward, softmaxXentForward } from './softmax_xent.ts';

export interface RefModelOptions {
  eps: number; momentum: number; gradScale: number; dropoutSeeds?: number[];
  /** Ghost batch norm (src/nn/model.ts): BN statistics over each run of bnGroup images (absent: the whole batch). */
  bnGroup?: number;
}

/** The [start, end) element ranges of a batch tensor's BN groups (one: the whole batch). */
function bnRanges(shape: readonly number[], group: number | undefined): [number, number][] {
  const n = shape[0]!;
  const per = shape.slice(1).reduce((a, b) => a * b, 1);
  const g = group ?? n;
  if (n % g !== 0) throw new RangeError(`refTrainStep: a batch of ${n} is not whole BN groups of ${g}`);
  return Array.from({ length: n / g }, (_, k) => [k * g * per, (k + 1) * g * per]);
}

export interface RefStepResult {
  /** Sum over samples of the cross-entropy, times gradScale. */
  loss: number;
  logits: Float64Array;
  /** d loss / d params, flat, the model's layout. */
  grad: Float64Array;
}

/** Training-mode forward + backward of one batch x [N, C, H, W]. */
export function refTrainStep(
  spec: ModelSpec, layout: Layout, params: ArrayLike<number>, x: Float64Array, labels: Int32Array, o: RefModelOptions,
): RefStepResult {
  const N = labels.length;
  const shapes = layout.shapes.map((s) => [N, ...s]);
  const P = (node: number, role: string): Float64Array => {
    const p = layout.params.find((q) => q.node === node && q.role === role)!;
    return Float64Array.from({ length: p.length }, (_, i) => params[p.offset + i]!);
  };
  const grad = new Float64Array(layout.paramFloats);
  const G = (node: number, role: string, g: Float64Array) => {
    const p = layout.params.find((q) => q.node === node && q.role === role)!;
    for (let i = 0; i < p.length; i++) grad[p.offset + i] += g[i]!;
  };
  const out: Float64Array[] = [x];
  const saved: unknown[] = [null];
  spec.nodes.forEach((n, i) => {
    if (n.op === 'input') return;
    const xin = n.op === 'add' ? out[n.a]! : out[n.in]!;
    const xs = n.op === 'add' ? shapes[n.a]! : shapes[n.in]!;
    switch (n.op) {
      case 'conv': {
        let y = conv.conv2dForward(xin, xs, P(i, 'weight'), [n.cout, xs[1]!, n.k, n.k], { stride: n.stride, pad: n.pad });
        if (n.bias) y = bias.biasForward(y, P(i, 'bias'), shapes[i]!);
        out.push(y); saved.push(null); return;
      }
      case 'linear': {
        const F = xs[1]!;
        let y = gemm(xin, P(i, 'weight'), null, { M: N, N: n.out, K: F, transB: true });
        if (n.bias) y = bias.biasForward(y, P(i, 'bias'), shapes[i]!);
        out.push(y); saved.push(null); return;
      }
      case 'bn': {
        const c = xs[1]!;
        const y = new Float64Array(xin.length);
        const groups = bnRanges(xs, o.bnGroup).map(([a, b]) => {
          const r = bn.batchNormForward(
            xin.subarray(a, b), [(b - a) / (xin.length / xs[0]!), ...xs.slice(1)], P(i, 'bn-gamma'), P(i, 'bn-beta'),
            new Float64Array(c), new Float64Array(c).fill(1), { eps: o.eps, momentum: o.momentum },
          );
          y.set(r.y, a);
          return r;
        });
        out.push(y); saved.push(groups); return;
      }
      case 'relu': out.push(reluForward(xin)); saved.push(null); return;
      case 'maxpool': {
        const r = pool.maxPoolForward(xin, xs, { kernel: n.k, stride: n.stride, pad: n.pad });
        out.push(r.y); saved.push(r.argmax); return;
      }
      case 'avgpool': out.push(pool.avgPoolForward(xin, xs, { kernel: n.k, stride: n.stride, pad: n.pad })); saved.push(null); return;
      case 'gap': out.push(pool.globalAvgPoolForward(xin, xs)); saved.push(null); return;
      case 'lrn': out.push(lrn.lrnForward(xin, xs, n.params)); saved.push(null); return;
      case 'dropout': {
        const seed = o.dropoutSeeds?.[i];
        out.push(seed === undefined || n.p === 0 ? xin : dropout.dropoutForward(xin, { p: n.p, seed }));
        saved.push(null); return;
      }
      case 'add': out.push(xin.map((v, j) => v + out[n.b]![j]!)); saved.push(null); return;
      case 'flatten': out.push(xin); saved.push(null); return;
    }
  });
  const last = spec.nodes.length - 1;
  const logits = out[last]!;
  const losses = softmaxXentForward(logits, labels, shapes[last]!);
  const loss = losses.reduce((s, v) => s + v, 0) * o.gradScale;
  const dOut: (Float64Array | null)[] = spec.nodes.map(() => null);
  dOut[last] = softmaxXentBackward(logits, labels, shapes[last]!, o.gradScale);
  const addTo = (j: number, g: Float64Array) => {
    const d = dOut[j];
    if (!d) dOut[j] = Float64Array.from(g);
    else for (let k = 0; k < g.length; k++) d[k] += g[k]!;
  };
  for (let i = last; i >= 1; i--) {
    const n = spec.nodes[i]!;
    const dy = dOut[i];
    if (!dy || n.op === 'input') continue;
    const j = inputsOf(n)[0]!;
    const xin = out[j]!, xs = shapes[j]!;
    switch (n.op) {
      case 'conv': {
        const ws = [n.cout, xs[1]!, n.k, n.k];
        const cp = { stride: n.stride, pad: n.pad };
        G(i, 'weight', conv.conv2dBackwardFilter(xin, dy, xs, ws, cp));
        if (n.bias) G(i, 'bias', bias.biasBackward(dy, shapes[i]!)[1]);
        addTo(j, conv.conv2dBackwardInput(dy, P(i, 'weight'), xs, ws, cp));
        break;
      }
      case 'linear': {
        const [dx, dw] = gemmBackward(xin, P(i, 'weight'), dy, { M: N, N: n.out, K: xs[1]!, transB: true });
        G(i, 'weight', dw);
        if (n.bias) G(i, 'bias', bias.biasBackward(dy, shapes[i]!)[1]);
        addTo(j, dx);
        break;
      }
      case 'bn': {
        const groups = saved[i] as bn.BatchNormForwardResult[];
        const dx = new Float64Array(xin.length);
        bnRanges(xs, o.bnGroup).forEach(([a, b], k) => {
          const r = groups[k]!;
          const shape = [(b - a) / (xin.length / xs[0]!), ...xs.slice(1)];
          const g = bn.batchNormBackward(xin.subarray(a, b), dy.subarray(a, b), shape, P(i, 'bn-gamma'), r.mean, r.invstd);
          G(i, 'bn-gamma', g.dgamma); G(i, 'bn-beta', g.dbeta);
          dx.set(g.dx, a);
        });
        addTo(j, dx);
        break;
      }
      case 'relu': addTo(j, reluBackward(xin, dy)); break;
      case 'maxpool': addTo(j, pool.maxPoolBackward(dy, saved[i] as Uint32Array, xs, { kernel: n.k, stride: n.stride, pad: n.pad })); break;
      case 'avgpool': addTo(j, pool.avgPoolBackward(dy, xs, { kernel: n.k, stride: n.stride, pad: n.pad })); break;
      case 'gap': addTo(j, pool.globalAvgPoolBackward(dy, xs)); break;
      case 'lrn': addTo(j, lrn.lrnBackward(xin, dy, xs, n.params)); break;
      case 'dropout': {
        const seed = o.dropoutSeeds?.[i];
        addTo(j, seed === undefined || n.p === 0 ? dy : dropout.dropoutBackward(dy, { p: n.p, seed }));
        break;
      }
      case 'add': addTo(n.a, dy); addTo(n.b, dy); break;
      case 'flatten': addTo(j, dy); break;
    }
  }
  return { loss, logits, grad };
}
