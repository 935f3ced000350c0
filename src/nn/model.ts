// A model on an Engine (WebGPU or wasm, src/backend/engine.ts): the flat parameter, gradient and state buffers, the activations of one
// batch size, and forward / backward walks over the node list (src/nn/graph.ts). Forward keeps
// what backward needs (llm.c style); backward runs the list in reverse and ADDS parameter
// gradients into the flat gradient buffer, so gradients of several micro-batches (or several
// peers, after the all-reduce) sum. Nothing here reads back: a whole step is recorded into
// one command stream and only the caller decides when to read.
import type { Engine, TensorLike } from '../backend/engine.ts';
import { VtError } from '../errors.ts';
import { reshape } from '../shapes/shape.ts';
import { hash32 } from '../rng.ts';
import { type ModelSpec, type NodeSpec, inputsOf } from './graph.ts';
import { type Layout, type LayoutOptions, type ParamTensor, initParams, initState, layoutOf } from './layout.ts';

/** The dropout mask seed of a node at a step: every peer derives the same one. */
export function dropoutSeed(stepSeed: number, node: number): number {
  return hash32((stepSeed * 7919 + node) >>> 0);
}

export const BN_EPS = 1e-5;
export const BN_MOMENTUM = 0.1;

interface Activations<T> {
  batch: number;
  out: (T | null)[];
  grad: (T | null)[];
  /** Per node: argmax (max-pool); BN: [mean, invstd] of each statistics group in turn. */
  saved: T[][];
  /** Images per BN statistics group in this batch (the whole batch without ghost batch norm). */
  bnGroup: number;
  dropoutSeeds: number[];
  labels: T;
  losses: T;
  total: T;
  counts: T;
  owned: T[];
}

type Views<T> = Map<number, Map<string, T>>;

/** A backward pass recorded in stages (Model.beginBackward). */
export interface BackwardPass {
  /** The highest node whose backward is not recorded yet (0 once the pass is complete). */
  readonly next: number;
  /** Records the backward of nodes next, next - 1, ..., node (none when node > next). */
  runTo(node: number): void;
}

export interface ModelOptions {
  seed?: number;
  layout?: LayoutOptions;
  weights?: Float32Array;
  /**
   * Ghost batch norm: in training, BN normalises each run of `bnGroup` images of a batch on its
   * own (a batch is then whole groups), so a slice gives the same gradient however it is cut into
   * micro-batches of whole groups. Absent: BN normalises over the whole batch.
   */
  bnGroup?: number;
  /**
   * Whether a conv or linear layer's bias, or a BN, and the ReLU after it (its only consumer) run as one op, where the
   * engine has the fused ops (Engine.biasRelu, Engine.batchNormReluForward): the same bits, fewer passes over memory.
   * Default true; false for comparisons.
   */
  fuse?: boolean;
}

/**
 * For each node, the ReLU node fused after it, or -1: a conv or linear node with a bias (when `bias`), or a BN node
 * (when `bn`), whose only consumer is a ReLU. The bias or BN and the ReLU then run as one op.
 */
function fusedReluAfter(spec: ModelSpec, consumers: readonly number[], kinds: { bias: boolean; bn: boolean }): number[] {
  const after = spec.nodes.map(() => -1);
  spec.nodes.forEach((n, j) => {
    if (n.op !== 'relu' || consumers[n.in] !== 1) return;
    const p = spec.nodes[n.in]!;
    if ((kinds.bias && (p.op === 'conv' || p.op === 'linear') && p.bias) || (kinds.bn && p.op === 'bn')) after[n.in] = j;
  });
  return after;
}

/** The model's BN group size (null: none), refused where a group's tensors could not be views on this engine. */
export function checkBnGroup(spec: ModelSpec, shapes: readonly (readonly number[])[], bnGroup: number | undefined, viewAlign: number): number | null {
  if (bnGroup === undefined) return null;
  if (!Number.isInteger(bnGroup) || bnGroup < 1) throw new VtError('bad-shape', `${spec.name}: bnGroup must be an integer >= 1 images, got ${bnGroup}`);
  spec.nodes.forEach((n, i) => {
    if (n.op !== 'bn') return;
    const per = shapes[n.in]!.reduce((x, y) => x * y, 1);
    if ((bnGroup * per) % viewAlign !== 0) {
      throw new VtError('bad-shape', `${spec.name}: a BN group of ${bnGroup} images at node ${i} is ${bnGroup * per} floats, `
        + `not a multiple of this engine's view alignment (${viewAlign}): choose a bnGroup that is a multiple of ${viewAlign / gcd(per, viewAlign)}`);
    }
  });
  return bnGroup;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** The images per BN group of a batch: the whole batch without ghost BN, or when it is not whole groups (inference only). */
function bnGroupOf(bnGroup: number | null, batch: number): number {
  return bnGroup !== null && batch % bnGroup === 0 ? bnGroup : Math.max(1, batch);
}

/**
 * Calls f for each BN statistics group of node i's batch, in order: `view` cuts a batch-sized
 * tensor to the group's images (the tensor itself for one group), `stats` are its saved mean and invstd.
 */
function eachBnGroup<T extends TensorLike>(e: Engine<T>, a: Activations<T>, i: number, f: (view: (t: T) => T, stats: [T, T]) => void): void {
  const groups = a.batch / a.bnGroup;
  const saved = a.saved[i]!;
  for (let k = 0; k < groups; k++) {
    const view = (t: T): T => (groups === 1 ? t : e.view(t, k * a.bnGroup * (t.size / a.batch), [a.bnGroup, ...t.shape.slice(1)]));
    f(view, [saved[2 * k]!, saved[2 * k + 1]!]);
  }
}

export class Model<T extends TensorLike = TensorLike> {
  readonly spec: ModelSpec;
  readonly layout: Layout;
  readonly params: T;
  readonly grads: T;
  readonly state: T;
  readonly engine: Engine<T>;
  private readonly consumers: number[];
  /** fusedReluAfter's table (all -1 when not fusing), and its inverse: for a fused ReLU node, the node before it. */
  private readonly reluAfter: number[];
  private readonly reluOf: number[];
  /** For a max pool node whose input is a ReLU fused after a bias (the pool its only consumer), that ReLU node, or -1. */
  private readonly poolAfterRelu: number[];
  private acts: Activations<T> | null = null;
  /** Views of each node's parameter tensors (and of their gradients), by role. */
  private readonly views: Views<T> = new Map();
  private readonly gradViews: Views<T> = new Map();
  private readonly stateViews: Views<T> = new Map();
  private training = true;
  /** Ghost batch norm: images per BN statistics group in training (null: the whole batch). */
  readonly bnGroup: number | null;

  constructor(engine: Engine<T>, spec: ModelSpec, opts: ModelOptions = {}) {
    this.engine = engine;
    const gpu = engine;
    this.spec = spec;
    this.layout = layoutOf(spec, opts.layout);
    this.consumers = spec.nodes.map(() => 0);
    spec.nodes.forEach((n) => inputsOf(n).forEach((i) => this.consumers[i]!++));
    spec.nodes.forEach((n, i) => {
      if (n.op === 'flatten' && this.consumers[n.in] !== 1) {
        throw new VtError('bad-shape', `${spec.name}: flatten at node ${i} shares its input with other layers; flatten aliases its input`);
      }
    });
    this.bnGroup = checkBnGroup(spec, this.layout.shapes, opts.bnGroup, engine.viewAlign);
    const fuse = opts.fuse ?? true;
    const bn = fuse && !!engine.batchNormReluForward && !!engine.batchNormReluInference && !!engine.batchNormReluBackward;
    this.reluAfter = fusedReluAfter(spec, this.consumers, { bias: fuse && !!engine.biasRelu && !!engine.reluBiasBackward, bn });
    this.reluOf = spec.nodes.map(() => -1);
    this.reluAfter.forEach((j, i) => { if (j >= 0) this.reluOf[j] = i; });
    this.poolAfterRelu = spec.nodes.map((n) => {
      if (!fuse || !engine.poolReluBiasBackward || n.op !== 'maxpool' || this.consumers[n.in] !== 1) return -1;
      const k = this.reluOf[n.in]!;
      return k >= 0 && spec.nodes[k]!.op !== 'bn' ? n.in : -1;
    });
    const w = opts.weights ?? initParams(this.layout, opts.seed ?? 1);
    if (w.length !== this.layout.paramFloats) {
      throw new VtError('bad-shape', `${spec.name}: weights have ${w.length} floats, the layout needs ${this.layout.paramFloats}`);
    }
    this.params = gpu.upload(w, [this.layout.paramFloats], `${spec.name}.params`);
    this.grads = gpu.zeros([this.layout.paramFloats], 'f32', `${spec.name}.grads`);
    this.state = gpu.upload(initState(this.layout), [this.layout.stateFloats], `${spec.name}.state`);
    for (const p of this.layout.params) {
      this.viewsOf(this.views, p.node).set(p.role, gpu.view(this.params, p.offset, p.shape));
      this.viewsOf(this.gradViews, p.node).set(p.role, gpu.view(this.grads, p.offset, p.shape));
    }
    for (const s of this.layout.state) this.viewsOf(this.stateViews, s.node).set(s.role, gpu.view(this.state, s.offset, [s.length]));
  }

  private viewsOf(m: Views<T>, node: number): Map<string, T> {
    let v = m.get(node);
    if (!v) m.set(node, (v = new Map()));
    return v;
  }

  /** The gradient view of a parameter tensor. */
  gradView(p: ParamTensor): T {
    return this.engine.view(this.grads, p.offset, p.shape);
  }

  private param(node: number, role: string, buf: 'params' | 'grads' = 'params'): T {
    const t = (buf === 'params' ? this.views : this.gradViews).get(node)?.get(role);
    if (!t) throw new VtError('bad-shape', `${this.spec.name}: node ${node} has no ${role}`);
    return t;
  }

  private stateOf(node: number, role: 'running-mean' | 'running-var'): T {
    return this.stateViews.get(node)!.get(role)!;
  }

  /** Allocates (once per batch size) every activation and gradient tensor. */
  private activations(batch: number): Activations<T> {
    if (this.acts?.batch === batch) return this.acts;
    const bnGroup = bnGroupOf(this.bnGroup, batch);
    this.releaseActivations();
    const g = this.engine;
    const owned: T[] = [];
    const own = (t: T) => (owned.push(t), t);
    const shapes = this.layout.shapes;
    const out: (T | null)[] = [], grad: (T | null)[] = [], saved: T[][] = [];
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
        for (let k = 0; k < batch / bnGroup; k++) saved[i]!.push(own(g.empty([c], 'f32', `bn${i}.mean${k}`)), own(g.empty([c], 'f32', `bn${i}.invstd${k}`)));
      }
    });
    this.acts = {
      batch, bnGroup, out, grad, saved, dropoutSeeds: this.spec.nodes.map(() => 0),
      labels: own(g.empty([batch], 'i32', 'labels')),
      losses: own(g.empty([batch], 'f32', 'losses')),
      total: own(g.empty([1], 'f32', 'loss')),
      counts: own(g.zeros([2], 'u32', 'topk')),
      owned,
    };
    return this.acts;
  }

  releaseActivations(): void {
    if (this.acts) this.engine.release(...this.acts.owned);
    this.acts = null;
  }

  /** The logits tensor [batch, classes] of the last forward. */
  get logits(): T {
    const a = this.acts;
    if (!a) throw new VtError('bad-shape', 'no forward has run yet');
    return a.out[a.out.length - 1]!;
  }

  /**
   * Records the forward pass of a batch x [N, C, H, W]. `train` uses batch statistics (and
   * updates the running ones) and dropout; `seed` makes the dropout masks of this step.
   */
  forward(x: T, opts: { train: boolean; seed?: number }): T {
    const [c, h, w] = this.spec.input;
    if (x.shape.length !== 4 || x.shape[1] !== c || x.shape[2] !== h || x.shape[3] !== w) {
      throw new VtError('bad-shape', `${this.spec.name} takes [N, ${c}, ${h}, ${w}] images, got [${x.shape.join(', ')}]`);
    }
    const batch = x.shape[0]!;
    if (opts.train && this.bnGroup !== null && batch % this.bnGroup !== 0) {
      throw new VtError('bad-shape', `${this.spec.name}: a training batch of ${batch} images is not whole BN groups of ${this.bnGroup} (ghost batch norm): `
        + `cut slices and micro-batches in multiples of ${this.bnGroup}`);
    }
    const a = this.activations(batch);
    this.training = opts.train;
    a.out[0] = x;
    this.spec.nodes.forEach((n, i) => {
      if (n.op === 'dropout') a.dropoutSeeds[i] = dropoutSeed(opts.seed ?? 0, i);
      this.forwardNode(n, i, a);
    });
    return a.out[a.out.length - 1]!;
  }

  private forwardNode(n: NodeSpec, i: number, a: Activations<T>): void {
    const g = this.engine;
    const y = a.out[i]!;
    switch (n.op) {
      case 'input': case 'flatten': return;
      case 'conv':
        g.conv2dForward(a.out[n.in]!, this.param(i, 'weight'), y, { stride: n.stride, pad: n.pad });
        if (n.bias) this.biasForward(i, a);
        return;
      case 'linear':
        g.gemm(a.out[n.in]!, this.param(i, 'weight'), y, { transB: true });
        if (n.bias) this.biasForward(i, a);
        return;
      case 'bn': {
        const x = a.out[n.in]!;
        const [gamma, beta] = [this.param(i, 'bn-gamma'), this.param(i, 'bn-beta')];
        const [rm, rv] = [this.stateOf(i, 'running-mean'), this.stateOf(i, 'running-var')];
        // With the ReLU after it fused: into the ReLU's output (this node's own output is not written).
        const j = this.reluAfter[i]!, out = j < 0 ? y : a.out[j]!;
        if (!this.training) {
          if (j < 0) g.batchNormInference(x, gamma, beta, rm, rv, out, { eps: BN_EPS });
          else g.batchNormReluInference!(x, gamma, beta, rm, rv, out, { eps: BN_EPS });
          return;
        }
        // Each statistics group in turn (one group: the whole batch); the running statistics take them in that order.
        const p = { eps: BN_EPS, momentum: BN_MOMENTUM };
        eachBnGroup(g, a, i, (view, [mean, invstd]) => {
          if (j < 0) g.batchNormForward(view(x), gamma, beta, rm, rv, view(out), mean, invstd, p);
          else g.batchNormReluForward!(view(x), gamma, beta, rm, rv, view(out), mean, invstd, p);
        });
        return;
      }
      case 'relu': if (this.reluOf[i]! < 0) g.reluForward(a.out[n.in]!, y); return; // else done with the bias or BN before it
      case 'maxpool': g.maxPoolForward(a.out[n.in]!, y, a.saved[i]![0]!, { kernel: n.k, stride: n.stride, pad: n.pad }); return;
      case 'avgpool': g.avgPoolForward(a.out[n.in]!, y, { kernel: n.k, stride: n.stride, pad: n.pad }); return;
      case 'gap': g.globalAvgPoolForward(a.out[n.in]!, y); return;
      case 'lrn': g.lrnForward(a.out[n.in]!, y, n.params); return;
      case 'dropout':
        if (this.training && n.p > 0) g.dropoutForward(a.out[n.in]!, y, { p: n.p, seed: a.dropoutSeeds[i]! });
        else g.copy(a.out[n.in]!, y);
        return;
      case 'add': g.add(a.out[n.a]!, a.out[n.b]!, y); return;
    }
  }

  /**
   * Records softmax cross-entropy of the last forward against labels (i32 [N], uploaded by the
   * caller into `labelsTensor`); dlogits = (softmax - target) * gradScale, the target smoothed
   * by `smoothing` (0: onehot). Returns the tensor holding the summed loss.
   */
  loss(gradScale: number, smoothing = 0): T {
    const a = this.acts!;
    const last = a.out.length - 1;
    this.engine.softmaxXent(a.out[last]!, a.labels, a.grad[last]!, a.losses, a.total, { gradScale, smoothing });
    return a.total;
  }

  /** The labels tensor of the current batch size, to write labels into before loss(). */
  labelsTensor(batch: number): T {
    return this.activations(batch).labels;
  }

  /** Records top-1 / top-k counting of the last forward into the counts tensor (u32 [2]). */
  countCorrect(k: number, accumulate: boolean): T {
    const a = this.acts!;
    this.engine.topkCount(a.out[a.out.length - 1]!, a.labels, a.counts, { k, accumulate });
    return a.counts;
  }

  zeroGrads(): void {
    this.engine.fill(this.grads, 0);
  }

  /** Records the backward pass of the last forward + loss, ADDING into the gradient buffer. */
  backward(): void {
    this.beginBackward().runTo(1);
  }

  /**
   * The backward pass of the last forward + loss, recorded in stages: runTo(i) records the
   * nodes not yet done down to node i. Node i's parameter gradients are final once it ran
   * (only node i writes them), and parameters lie in node order (layout.ts), so after
   * runTo(i) the gradient buffer from node i's first parameter to the end is final. The ops
   * and their order are those of backward(): the gradients are bitwise the same however the
   * pass is cut (src/train/overlap.ts reads buckets back between stages).
   */
  beginBackward(): BackwardPass {
    const a = this.acts;
    if (!a) throw new VtError('bad-shape', 'backward before forward');
    const written = this.spec.nodes.map(() => false);
    written[written.length - 1] = true; // dlogits, from loss()
    const held = this.spec.nodes.map((_, k) => k);
    let next = this.spec.nodes.length - 1;
    return {
      get next() { return next; },
      runTo: (node: number) => {
        if (!Number.isInteger(node) || node < 1) throw new VtError('bad-shape', `${this.spec.name}: backward runs down to a node >= 1, got ${node}`);
        if (this.acts !== a) throw new VtError('bad-shape', `${this.spec.name}: a forward of another batch size ran during this backward`);
        for (; next >= node; next--) this.backwardNode(this.spec.nodes[next]!, next, a, written, held);
      },
    };
  }

  /**
   * Node i's bias added to its output in place; or, with the ReLU fused after it, written with the ReLU into the ReLU's
   * output (node i's own output then keeps the values without the bias, and nothing else reads them).
   */
  private biasForward(i: number, a: Activations<T>): void {
    const j = this.reluAfter[i]!, b = this.param(i, 'bias');
    if (j < 0) this.engine.biasAddInPlace(a.out[i]!, b);
    else this.engine.biasRelu!(a.out[i]!, b, a.out[j]!); // set with reluAfter only when the engine has it
  }

  /**
   * Writes the gradient of node j's output: the first consumer overwrites, later consumers
   * (residual branches) add. `write(dst)` must overwrite dst.
   */
  private toInput(j: number, a: Activations<T>, written: boolean[], write: (dst: T) => void): void {
    if (j === 0) return; // no gradient for the images
    const dst = a.grad[j]!;
    if (!written[j]) {
      write(dst);
      written[j] = true;
      return;
    }
    const tmp = this.engine.empty(dst.shape, 'f32', 'grad.tmp');
    write(tmp);
    this.engine.addInPlace(dst, tmp);
    this.engine.release(tmp);
  }

  /**
   * `held[k]`: the node whose gradient tensor holds node k's output gradient, k itself unless a residual add passed its own
   * gradient to k (see 'add').
   */
  private backwardNode(n: NodeSpec, i: number, a: Activations<T>, written: boolean[], held: number[]): void {
    const g = this.engine;
    const dy = a.grad[held[i]!]!;
    switch (n.op) {
      case 'input': return;
      case 'flatten': written[n.in] = written[i]!; return;
      case 'conv': {
        const params = { stride: n.stride, pad: n.pad };
        const x = a.out[n.in]!;
        g.conv2dBackwardFilter(x, dy, this.param(i, 'weight', 'grads'), params, { accumulate: true });
        if (n.bias && this.reluAfter[i]! < 0) g.biasBackward(dy, this.param(i, 'bias', 'grads'), { accumulate: true });
        if (n.in !== 0) {
          g.conv2dBackwardInput(dy, this.param(i, 'weight'), a.grad[n.in]!, params, { accumulate: written[n.in] });
          written[n.in] = true;
        }
        return;
      }
      case 'linear': {
        const x = a.out[n.in]!;
        g.gemm(dy, x, this.param(i, 'weight', 'grads'), { transA: true, beta: 1 });
        if (n.bias && this.reluAfter[i]! < 0) g.biasBackward(dy, this.param(i, 'bias', 'grads'), { accumulate: true });
        if (n.in !== 0) {
          g.gemm(dy, this.param(i, 'weight'), a.grad[n.in]!, { beta: written[n.in] ? 1 : 0 });
          written[n.in] = true;
        }
        return;
      }
      case 'bn': {
        const x = a.out[n.in]!;
        const [gamma, dgamma, dbeta] = [this.param(i, 'bn-gamma'), this.param(i, 'bn-gamma', 'grads'), this.param(i, 'bn-beta', 'grads')];
        // With the ReLU after it fused: from the ReLU's output gradient, gated by the BN's output recomputed.
        const j = this.reluAfter[i]!, beta = this.param(i, 'bn-beta'), p = { accumulate: true };
        this.toInput(n.in, a, written, (dst) => eachBnGroup(g, a, i, (view, [mean, invstd]) => {
          if (j < 0) g.batchNormBackward(view(x), view(dy), gamma, mean, invstd, view(dst), dgamma, dbeta, p);
          else g.batchNormReluBackward!(view(x), view(a.grad[held[j]!]!), gamma, beta, mean, invstd, view(dst), dgamma, dbeta, p);
        }));
        return;
      }
      case 'relu': {
        if (this.poolAfterRelu.includes(i)) return; // with the max pool after it
        const k = this.reluOf[i]!;
        if (k < 0) this.toInput(n.in, a, written, (dst) => g.reluBackward(a.out[n.in]!, dy, dst));
        // Fused after a BN: the BN's backward reads this node's gradient. After a bias: the mask from the ReLU's output
        // (> 0 where its input is), and node k's bias gradient with it.
        else if (this.spec.nodes[k]!.op !== 'bn') {
          this.toInput(k, a, written, (dst) => g.reluBiasBackward!(a.out[i]!, dy, dst, this.param(k, 'bias', 'grads'), { accumulate: true }));
        }
        return;
      }
      case 'maxpool': {
        const pool = { kernel: n.k, stride: n.stride, pad: n.pad }, j = this.poolAfterRelu[i]!;
        if (j < 0) this.toInput(n.in, a, written, (dst) => g.maxPoolBackward(dy, a.saved[i]![0]!, dst, pool));
        // After a ReLU fused after a bias: the pool's, the ReLU's and the bias's backward in one op, into the gradient of
        // the layer before the ReLU (node k), as the ReLU's own backward would have written it.
        else {
          const k = this.reluOf[j]!;
          this.toInput(k, a, written, (dst) =>
            g.poolReluBiasBackward!(dy, a.saved[i]![0]!, a.out[j]!, dst, this.param(k, 'bias', 'grads'), { ...pool, accumulate: true }));
        }
        return;
      }
      case 'avgpool': this.toInput(n.in, a, written, (dst) => g.avgPoolBackward(dy, dst, { kernel: n.k, stride: n.stride, pad: n.pad })); return;
      case 'gap': this.toInput(n.in, a, written, (dst) => g.globalAvgPoolBackward(dy, dst)); return;
      case 'lrn': this.toInput(n.in, a, written, (dst) => g.lrnBackward(a.out[n.in]!, a.out[i]!, dy, dst, n.params)); return;
      case 'dropout':
        this.toInput(n.in, a, written, (dst) => (this.training && n.p > 0
          ? g.dropoutBackward(dy, dst, { p: n.p, seed: a.dropoutSeeds[i]! })
          : g.copy(dy, dst)));
        return;
      case 'add':
        // An input whose only consumer is this add (a residual block's last BN; a projection shortcut's) has dy as its
        // gradient: it reads dy where it lies (nothing writes it after this node), not a copy. Others get a copy, which
        // their other consumers add to.
        for (const j of [n.a, n.b]) {
          if (j !== 0 && !written[j] && this.consumers[j] === 1 && this.spec.nodes[j]!.op !== 'flatten') {
            held[j] = held[i]!;
            written[j] = true;
          } else this.toInput(j, a, written, (dst) => g.copy(dy, dst));
        }
        return;
    }
  }

  /** Reads the flat parameters back (for checkpoints and checksums). */
  async readParams(): Promise<Float32Array> {
    return this.engine.readF32(this.params);
  }

  destroy(): void {
    this.releaseActivations();
    this.engine.release(this.params, this.grads, this.state);
  }
}
