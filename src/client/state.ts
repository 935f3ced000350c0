// A volunteer's training state as a checkpoint and back, and the one-step backup that lets an
// aborted step be undone: a peer may have applied step s when another peer fails, and the
// coordinator then re-runs step s.
//
// The weights W and the momentum V live on the host (Float32Array): the optimiser step runs
// there in the one implementation every backend shares (src/optim/host.ts; its loops in wasm
// where the runtime has it, with W and V in that module's memory: src/optim/host-wasm.ts), and
// W is written to the engine after each step. The BN running statistics are per peer and stay on the
// engine (copied there for the backup).
import type { Engine, TensorLike } from '../backend/engine.ts';
import { decodeCheckpoint, encodeCheckpoint, layoutFingerprint, type Checkpoint } from '../checkpoint/format.ts';
import { concatBytes } from '../data/bytes.ts';
import { initParams, initState } from '../nn/layout.ts';
import type { Model } from '../nn/model.ts';
import { hostOptimizerStep } from '../optim/host.ts';
import { WasmHostOptimizer } from '../optim/host-wasm.ts';
import type { OptimizerConfig } from '../optim/types.ts';
import type { OuterConfig } from '../optim/outer.ts';

export class StateError extends Error {
  readonly kind = 'bad-state';
  constructor(message: string) {
    super(message);
    this.name = 'StateError';
  }
}

export const fingerprintOf = (model: Model): string => layoutFingerprint(model.spec.name, model.layout);

/** The optimiser state's name in checkpoints (the WebGPU optimiser uses the same). */
const MOMENTUM = 'momentum';
/** The outer optimiser's momentum of a job in rounds (syncEvery > 1). */
const OUTER_MOMENTUM = 'outer-momentum';

export class TrainingState<T extends TensorLike = TensorLike> {
  /** The weights (the truth; the engine's copy is written from it). */
  readonly w: Float32Array;
  /** The momentum (of the inner steps, with rounds). */
  readonly v: Float32Array;
  /** The outer momentum of a job in rounds (syncEvery > 1); null for exact sync SGD. */
  readonly u: Float32Array | null;
  private readonly savedW: Float32Array;
  private readonly savedV: Float32Array;
  private readonly savedBn: T;
  private readonly engine: Engine<T>;
  /** Why the optimiser's loops run in JavaScript (empty when they run in wasm, or when the state was made without trying). */
  why = '';

  /**
   * `host`: the wasm optimiser whose memory holds W and V (TrainingState.create makes one where it can); without it
   * the step's loops run in JavaScript, with the same bits.
   */
  constructor(readonly model: Model<T>, readonly config: OptimizerConfig, readonly outer: OuterConfig | null = null,
    private readonly host: WasmHostOptimizer | null = null) {
    this.engine = model.engine;
    const n = model.layout.paramFloats;
    if (host && host.w.length !== n) throw new StateError(`the wasm optimiser holds ${host.w.length} parameters, the model has ${n}`);
    this.w = host ? host.w : new Float32Array(n);
    this.v = host ? host.v : new Float32Array(n);
    this.u = outer && outer.syncEvery > 1 ? new Float32Array(n) : null;
    this.savedW = new Float32Array(n);
    this.savedV = new Float32Array(n);
    this.savedBn = this.engine.empty(model.state.shape, 'f32', 'backup.bn');
  }

  /**
   * A state whose optimiser loops run in wasm where this runtime has it (about 3x faster: 146 against 419 ms a
   * ResNet-50 step), else in JavaScript; `hostLoops` says which, and `why` why not wasm.
   */
  static async create<T extends TensorLike>(model: Model<T>, config: OptimizerConfig, outer: OuterConfig | null = null): Promise<TrainingState<T>> {
    let host: WasmHostOptimizer | null = null, why = '';
    try {
      host = await WasmHostOptimizer.create(model.layout.paramFloats);
    } catch (e) {
      why = e instanceof Error ? e.message : String(e);
    }
    const state = new TrainingState(model, config, outer, host);
    state.why = why;
    return state;
  }

  /** Where the optimiser's loops run. */
  get hostLoops(): 'wasm' | 'js' {
    return this.host ? 'wasm' : 'js';
  }

  /** Copies the state (before a step). */
  backup(): void {
    this.savedW.set(this.w);
    this.savedV.set(this.v);
    this.engine.copy(this.model.state, this.savedBn);
  }

  /** Copies the backup back (undoing the step since backup()). */
  restore(): void {
    this.w.set(this.savedW);
    this.v.set(this.savedV);
    this.engine.write(this.model.params, this.w);
    this.engine.copy(this.savedBn, this.model.state);
  }

  /** The job's initial state: weights from the seed, fresh BN statistics, zero momentum. */
  reset(seed: number): void {
    this.w.set(initParams(this.model.layout, seed));
    this.v.fill(0);
    this.u?.fill(0);
    this.engine.write(this.model.params, this.w);
    this.engine.write(this.model.state, initState(this.model.layout));
  }

  /** The optimiser step t on the host with the summed gradient G; the engine gets the new W. */
  applyUpdate(G: Float32Array, t: number, globalBatch: number): void {
    const host = this.host;
    if (host) {
      if (G.length !== host.G.length) throw new StateError(`the gradient has ${G.length} floats, the model ${host.G.length}`);
      if (G !== host.G) host.G.set(G);
      host.step(this.config, this.model.layout.params, t, 1 / globalBatch);
    } else {
      hostOptimizerStep(this.config, this.model.layout.params, { w: this.w, v: this.v, G, t, gradScale: 1 / globalBatch });
    }
    this.engine.write(this.model.params, this.w);
  }

  async toCheckpoint(step: number, generation: number, metadata: Record<string, unknown>): Promise<Uint8Array> {
    const c: Checkpoint = {
      step, generation, fingerprint: fingerprintOf(this.model),
      weights: this.w.slice(),
      bnState: await this.engine.readF32(this.model.state),
      optimizer: { [MOMENTUM]: this.v.slice(), ...(this.u ? { [OUTER_MOMENTUM]: this.u.slice() } : {}) },
      metadata,
    };
    return concatBytes(encodeCheckpoint(c));
  }

  /** Loads a checkpoint file (verified: hash, model, sizes); returns its step. */
  load(file: Uint8Array, expectStep: number): number {
    const { model } = this;
    const c = decodeCheckpoint(file, `checkpoint of step ${expectStep}`);
    const want = fingerprintOf(model);
    if (c.fingerprint !== want) {
      throw new StateError(`the checkpoint is of model ${c.fingerprint}, this job trains ${want}: the coordinator serves another job's checkpoint`);
    }
    if (c.step !== expectStep) throw new StateError(`the checkpoint is of step ${c.step}, the coordinator asked for step ${expectStep}`);
    const sized = (name: string, a: Float32Array | undefined, n: number): Float32Array => {
      if (!a || a.length !== n) throw new StateError(`checkpoint tensor ${name} has ${a?.length ?? 0} floats, the model needs ${n}`);
      return a;
    };
    // Validate everything before changing anything.
    const w = sized('weights', c.weights, this.w.length);
    const bn = sized('bn-state', c.bnState, model.state.size);
    const v = sized(`optim/${MOMENTUM}`, c.optimizer[MOMENTUM], this.v.length);
    if (this.u && !c.optimizer[OUTER_MOMENTUM]) {
      throw new StateError(`the checkpoint of step ${c.step} has no outer momentum: it was written by a job without rounds, `
        + `and this job trains in rounds (syncEvery ${this.outer?.syncEvery}); start a fresh job (--fresh) or keep the job's settings`);
    }
    const u = this.u ? sized(`optim/${OUTER_MOMENTUM}`, c.optimizer[OUTER_MOMENTUM], this.u.length) : null;
    this.w.set(w);
    this.v.set(v);
    if (u) this.u?.set(u);
    this.engine.write(model.params, this.w);
    this.engine.write(model.state, bn);
    return c.step;
  }

  destroy(): void {
    this.engine.release(this.savedBn);
  }
}
