// A model on the GPU: the flat parameter, gradient and state buffers, the activations of one
// batch size, and forward / backward walks over the node list (src/nn/graph.ts). Forward keeps
// what backward needs (llm.c style); backward runs the list in reverse and ADDS parameter
// gradients into the flat gradient buffer, so gradients of several micro-batches (or several
// peers, after the all-reduce) sum. Nothing here reads back: a whole step is recorded into
// one command stream and only the caller decides when to read.
import { VtError } from '../errors.ts';
import type { Gpu } from '../gpu/runtime.ts';
import { type Tensor, reshape } from '../gpu/tensor.ts';
import { hash32 } from '../rng.ts';
import { batchNormBackward, batchNormForward, batchNormInference } from '../ops/batchnorm.ts';
import { biasAddInPlace, biasBackward } from '../ops/bias.ts';
import { conv2dBackwardFilter, conv2dBackwardInput, conv2dForward } from '../ops/conv2d.ts';
import { dropoutBackward, dropoutForward } from '../ops/dropout.ts';
import { add, addInPlace, fill } from '../ops/eltwise.ts';
import { gemm } from '../ops/gemm.ts';
import { lrnBackward, lrnForward } from '../ops/lrn.ts';
import { avgPoolBackward, avgPoolForward, globalAvgPoolBackward, globalAvgPoolForward, maxPoolBackward, maxPoolForward } from '../ops/pool.ts';
import { reluBackward, reluForward } from '../ops/relu.ts';
import { softmaxXent } from '../ops/softmax_xent.ts';
import { topkCount } from '../ops/topk.ts';
import { type ModelSpec, type NodeSpec, inputsOf } from './graph.ts';
import { type Layout, type LayoutOptions, type ParamTensor, initParams, initState, layoutOf } from './layout.ts';

/** The dropout mask seed of a node at a step: every peer derives the same one. */
export function dropoutSeed(stepSeed: number, node: number): number {
  return hash32((stepSeed * 7919 + node) >>> 0);
}

export const BN_EPS = 1e-5;
export const BN_MOMENTUM = 0.1;

interface Activations {
  batch: number;
  out: (Tensor | null)[];
  grad: (Tensor | null)[];
  /** Per node: argmax (max-pool), [mean, invstd] (BN). */
  saved: Tensor[][];
  dropoutSeeds: number[];
  labels: Tensor;
  losses: Tensor;
  total: Tensor;
  counts: Tensor;
  owned: Tensor[];
}

export class Model {
  readonly spec: ModelSpec;
  readonly layout: Layout;
  readonly params: Tensor;
  readonly grads: Tensor;
  readonly state: Tensor;
  private readonly gpu: Gpu;
  private readonly consumers: number[];
  private acts: Activations | null = null;
  /** Views of each node's parameter tensors, by role. */
  private readonly views: Map<number, Map<string, Tensor>> = new Map();
  private readonly stateViews: Map<number, Map<string, Tensor>> = new Map();
  private training = true;

  constructor(gpu: Gpu, spec: ModelSpec, opts: { seed?: number; layout?: LayoutOptions; weights?: Float32Array } = {}) {
    this.gpu = gpu;
    this.spec = spec;
    this.layout = layoutOf(spec, opts.layout);
    this.consumers = spec.nodes.map(() => 0);
    spec.nodes.forEach((n) => inputsOf(n).forEach((i) => this.consumers[i]!++));
    spec.nodes.forEach((n, i) => {
      if (n.op === 'flatten' && this.consumers[n.in] !== 1) throw new VtError('bad-shape', `${spec.name}: flatten at node ${i} shares its input with other layers; flatten aliases its input`);
    });
    const w = opts.weights ?? initParams(this.layout, opts.seed ?? 1);
    if (w.length !== this.layout.paramFloats) throw new VtError('bad-shape', `${spec.name}: weights have ${w.length} floats, the layout needs ${this.layout.paramFloats}`);
    this.params = gpu.upload(w, [this.layout.paramFloats], `${spec.name}.params`);
    this.grads = gpu.zeros([this.layout.paramFloats], 'f32', `${spec.name}.grads`);
    this.state = gpu.upload(initState(this.layout), [this.layout.stateFloats], `${spec.name}.state`);
    for (const p of this.layout.params) this.viewsOf(this.views, p.node).set(p.role, gpu.view(this.params, p.offset, p.shape));
    for (const s of this.layout.state) this.viewsOf(this.stateViews, s.node).set(s.role, gpu.view(this.state, s.offset, [s.length]));
  }

  private viewsOf(m: Map<number, Map<string, Tensor>>, node: number): Map<string, Tensor> {
    let v = m.get(node);
    if (!v) m.set(node, (v = new Map()));
    return v;
  }

  /** The gradient view of a parameter tensor. */
  gradView(p: ParamTensor): Tensor {
    return this.gpu.view(this.grads, p.offset, p.shape);
  }

  private param(node: number, role: string, buf: 'params' | 'grads' = 'params'): Tensor {
    const t = this.views.get(node)?.get(role);
    if (!t) throw new VtError('bad-shape', `${this.spec.name}: node ${node} has no ${role}`);
    return buf === 'params' ? t : { ...t, buffer: this.grads.buffer };
  }

  private stateOf(node: number, role: 'running-mean' | 'running-var'): Tensor {
    return this.stateViews.get(node)!.get(role)!;
  }

  /** Allocates (once per batch size) every activation and gradient tensor. */
  private activations(batch: number): Activations {
    if (this.acts?.batch === batch) return this.acts;
    this.releaseActivations();
    const g = this.gpu;
    const owned: Tensor[] = [];
    const own = (t: Tensor) => (owned.push(t), t);
    const shapes = this.layout.shapes;
    const out: (Tensor | null)[] = [], grad: (Tensor | null)[] = [], saved: Tensor[][] = [];
    this.spec.nodes.forEach((n, i) => {
      const shape = [batch, ...shapes[i]!];
      saved.push([]);
      if (n.op === 'input') { out.push(null); grad.push(null); return; }
      if (n.op === 'flatten') {
        out.push(reshape(out[n.in]!, shape));
        grad.push(grad[n.in] ? reshape(grad[n.in]!, shape) : null);
        return;
      }
      out.push(own(g.empty(shape, 'f32', `act${i}.${n.op}`)));
      // No gradient is needed for the input images.
      grad.push(own(g.empty(shape, 'f32', `grad${i}.${n.op}`)));
      if (n.op === 'maxpool') saved[i]!.push(own(g.empty(shape, 'u32', `argmax${i}`)));
      if (n.op === 'bn') {
        const c = shapes[n.in]![0]!;
        saved[i]!.push(own(g.empty([c], 'f32', `bn${i}.mean`)), own(g.empty([c], 'f32', `bn${i}.invstd`)));
      }
    });
    this.acts = {
      batch, out, grad, saved, dropoutSeeds: this.spec.nodes.map(() => 0),
      labels: own(g.empty([batch], 'i32', 'labels')),
      losses: own(g.empty([batch], 'f32', 'losses')),
      total: own(g.empty([1], 'f32', 'loss')),
      counts: own(g.zeros([2], 'u32', 'topk')),
      owned,
    };
    return this.acts;
  }

  releaseActivations(): void {
    if (this.acts) this.gpu.release(...this.acts.owned);
    this.acts = null;
  }

  /** The logits tensor [batch, classes] of the last forward. */
  get logits(): Tensor {
    const a = this.acts;
    if (!a) throw new VtError('bad-shape', 'no forward has run yet');
    return a.out[a.out.length - 1]!;
  }

  /**
   * Records the forward pass of a batch x [N, C, H, W]. `train` uses batch statistics (and
   * updates the running ones) and dropout; `seed` makes the dropout masks of this step.
   */
  forward(x: Tensor, opts: { train: boolean; seed?: number }): Tensor {
    const [c, h, w] = this.spec.input;
    if (x.shape.length !== 4 || x.shape[1] !== c || x.shape[2] !== h || x.shape[3] !== w) {
      throw new VtError('bad-shape', `${this.spec.name} takes [N, ${c}, ${h}, ${w}] images, got [${x.shape.join(', ')}]`);
    }
    const a = this.activations(x.shape[0]!);
    this.training = opts.train;
    a.out[0] = x;
    this.spec.nodes.forEach((n, i) => {
      if (n.op === 'dropout') a.dropoutSeeds[i] = dropoutSeed(opts.seed ?? 0, i);
      this.forwardNode(n, i, a);
    });
    return a.out[a.out.length - 1]!;
  }

  private forwardNode(n: NodeSpec, i: number, a: Activations): void {
    const g = this.gpu;
    const y = a.out[i]!;
    switch (n.op) {
      case 'input': case 'flatten': return;
      case 'conv':
        conv2dForward(g, a.out[n.in]!, this.param(i, 'weight'), y, { stride: n.stride, pad: n.pad });
        if (n.bias) biasAddInPlace(g, y, this.param(i, 'bias'));
        return;
      case 'linear':
        gemm(g, a.out[n.in]!, this.param(i, 'weight'), y, { transB: true });
        if (n.bias) biasAddInPlace(g, y, this.param(i, 'bias'));
        return;
      case 'bn': {
        const x = a.out[n.in]!;
        const [gamma, beta] = [this.param(i, 'bn-gamma'), this.param(i, 'bn-beta')];
        const [rm, rv] = [this.stateOf(i, 'running-mean'), this.stateOf(i, 'running-var')];
        if (this.training) batchNormForward(g, x, gamma, beta, rm, rv, y, a.saved[i]![0]!, a.saved[i]![1]!, { eps: BN_EPS, momentum: BN_MOMENTUM });
        else batchNormInference(g, x, gamma, beta, rm, rv, y, { eps: BN_EPS });
        return;
      }
      case 'relu': reluForward(g, a.out[n.in]!, y); return;
      case 'maxpool': maxPoolForward(g, a.out[n.in]!, y, a.saved[i]![0]!, { kernel: n.k, stride: n.stride, pad: n.pad }); return;
      case 'avgpool': avgPoolForward(g, a.out[n.in]!, y, { kernel: n.k, stride: n.stride, pad: n.pad }); return;
      case 'gap': globalAvgPoolForward(g, a.out[n.in]!, y); return;
      case 'lrn': lrnForward(g, a.out[n.in]!, y, n.params); return;
      case 'dropout':
        if (this.training && n.p > 0) dropoutForward(g, a.out[n.in]!, y, { p: n.p, seed: a.dropoutSeeds[i]! });
        else g.copy(a.out[n.in]!, y);
        return;
      case 'add': add(g, a.out[n.a]!, a.out[n.b]!, y); return;
    }
  }

  /**
   * Records softmax cross-entropy of the last forward against labels (i32 [N], uploaded by the
   * caller into `labelsTensor`); dlogits = (softmax - onehot) * gradScale. Returns the tensor
   * holding the summed loss.
   */
  loss(gradScale: number): Tensor {
    const a = this.acts!;
    const last = a.out.length - 1;
    softmaxXent(this.gpu, a.out[last]!, a.labels, a.grad[last]!, a.losses, a.total, { gradScale });
    return a.total;
  }

  /** The labels tensor of the current batch size, to write labels into before loss(). */
  labelsTensor(batch: number): Tensor {
    return this.activations(batch).labels;
  }

  /** Records top-1 / top-k counting of the last forward into the counts tensor (u32 [2]). */
  countCorrect(k: number, accumulate: boolean): Tensor {
    const a = this.acts!;
    topkCount(this.gpu, a.out[a.out.length - 1]!, a.labels, a.counts, { k, accumulate });
    return a.counts;
  }

  zeroGrads(): void {
    fill(this.gpu, this.grads, 0);
  }

  /** Records the backward pass of the last forward + loss, ADDING into the gradient buffer. */
  backward(): void {
    const a = this.acts;
    if (!a) throw new VtError('bad-shape', 'backward before forward');
    const written = this.spec.nodes.map(() => false);
    written[written.length - 1] = true; // dlogits, from loss()
    for (let i = this.spec.nodes.length - 1; i >= 1; i--) this.backwardNode(this.spec.nodes[i]!, i, a, written);
  }

  /**
   * Writes the gradient of node j's output: the first consumer overwrites, later consumers
   * (residual branches) add. `write(dst)` must overwrite dst.
   */
  private toInput(j: number, a: Activations, written: boolean[], write: (dst: Tensor) => void): void {
    if (j === 0) return; // no gradient for the images
    const dst = a.grad[j]!;
    if (!written[j]) {
      write(dst);
      written[j] = true;
      return;
    }
    const tmp = this.gpu.empty(dst.shape, 'f32', 'grad.tmp');
    write(tmp);
    addInPlace(this.gpu, dst, tmp);
    this.gpu.release(tmp);
  }

  private backwardNode(n: NodeSpec, i: number, a: Activations, written: boolean[]): void {
    const g = this.gpu;
    const dy = a.grad[i]!;
    switch (n.op) {
      case 'input': return;
      case 'flatten': written[n.in] = written[i]!; return;
      case 'conv': {
        const params = { stride: n.stride, pad: n.pad };
        const x = a.out[n.in]!;
        conv2dBackwardFilter(g, x, dy, this.param(i, 'weight', 'grads'), params, { accumulate: true });
        if (n.bias) biasBackward(g, dy, this.param(i, 'bias', 'grads'), { accumulate: true });
        if (n.in !== 0) {
          conv2dBackwardInput(g, dy, this.param(i, 'weight'), a.grad[n.in]!, params, { accumulate: written[n.in] });
          written[n.in] = true;
        }
        return;
      }
      case 'linear': {
        const x = a.out[n.in]!;
        gemm(g, dy, x, this.param(i, 'weight', 'grads'), { transA: true, beta: 1 });
        if (n.bias) biasBackward(g, dy, this.param(i, 'bias', 'grads'), { accumulate: true });
        if (n.in !== 0) {
          gemm(g, dy, this.param(i, 'weight'), a.grad[n.in]!, { beta: written[n.in] ? 1 : 0 });
          written[n.in] = true;
        }
        return;
      }
      case 'bn': {
        const x = a.out[n.in]!;
        const [mean, invstd] = a.saved[i]!;
        this.toInput(n.in, a, written, (dst) => batchNormBackward(g, x, dy, this.param(i, 'bn-gamma'), mean!, invstd!, dst, this.param(i, 'bn-gamma', 'grads'), this.param(i, 'bn-beta', 'grads'), { accumulate: true }));
        return;
      }
      case 'relu': this.toInput(n.in, a, written, (dst) => reluBackward(g, a.out[n.in]!, dy, dst)); return;
      case 'maxpool': this.toInput(n.in, a, written, (dst) => maxPoolBackward(g, dy, a.saved[i]![0]!, dst, { kernel: n.k, stride: n.stride, pad: n.pad })); return;
      case 'avgpool': this.toInput(n.in, a, written, (dst) => avgPoolBackward(g, dy, dst, { kernel: n.k, stride: n.stride, pad: n.pad })); return;
      case 'gap': this.toInput(n.in, a, written, (dst) => globalAvgPoolBackward(g, dy, dst)); return;
      case 'lrn': this.toInput(n.in, a, written, (dst) => lrnBackward(g, a.out[n.in]!, a.out[i]!, dy, dst, n.params)); return;
      case 'dropout':
        this.toInput(n.in, a, written, (dst) => (this.training && n.p > 0 ? dropoutBackward(g, dy, dst, { p: n.p, seed: a.dropoutSeeds[i]! }) : g.copy(dy, dst)));
        return;
      case 'add':
        for (const j of [n.a, n.b]) this.toInput(j, a, written, (dst) => g.copy(dy, dst));
        return;
    }
  }

  /** Reads the flat parameters back (for checkpoints and checksums). */
  async readParams(): Promise<Float32Array> {
    return this.gpu.readF32(this.params);
  }

  destroy(): void {
    this.releaseActivations();
    this.gpu.release(this.params, this.grads, this.state);
  }
}
