// A peer's training state on the GPU (weights, BN running statistics, optimiser state) as a
// checkpoint and back, and the one-step backup that lets an aborted step be undone: a peer
// may have applied step s when another peer fails, and the coordinator then re-runs step s.
import { decodeCheckpoint, encodeCheckpoint, layoutFingerprint, type Checkpoint } from '../checkpoint/format.ts';
import { concatBytes } from '../data/bytes.ts';
import type { Gpu } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { initParams, initState } from '../nn/layout.ts';
import type { Model } from '../nn/model.ts';
import type { Optimizer } from '../optim/types.ts';

export class StateError extends Error {
  readonly kind = 'bad-state';
  constructor(message: string) {
    super(message);
    this.name = 'StateError';
  }
}

export const fingerprintOf = (model: Model): string => layoutFingerprint(model.spec.name, model.layout);

/** Every tensor that a step changes, paired with the tensor that backs it up. */
interface Pair { live: Tensor; saved: Tensor }

export class TrainingState {
  private readonly pairs: Pair[];

  constructor(private readonly gpu: Gpu, readonly model: Model, readonly optimizer: Optimizer) {
    const live = [model.params, model.state, ...optimizer.stateTensors.map((t) => t.tensor)];
    this.pairs = live.map((t) => ({ live: t, saved: gpu.empty(t.shape, 'f32', 'backup') }));
  }

  /** Records copies of the state (before a step). */
  backup(): void {
    for (const p of this.pairs) this.gpu.copy(p.live, p.saved);
  }

  /** Records the copies back (undoing the step since backup()). */
  restore(): void {
    for (const p of this.pairs) this.gpu.copy(p.saved, p.live);
  }

  /** The job's initial state: weights from the seed, fresh BN statistics, zero momentum. */
  reset(seed: number): void {
    const { model, optimizer, gpu } = this;
    gpu.write(model.params, initParams(model.layout, seed));
    gpu.write(model.state, initState(model.layout));
    for (const t of optimizer.stateTensors) gpu.write(t.tensor, new Float32Array(t.tensor.size));
  }

  async toCheckpoint(step: number, generation: number, metadata: Record<string, unknown>): Promise<Uint8Array> {
    const { model, optimizer, gpu } = this;
    const c: Checkpoint = {
      step, generation, fingerprint: fingerprintOf(model),
      weights: await gpu.readF32(model.params),
      bnState: await gpu.readF32(model.state),
      optimizer: Object.fromEntries(await Promise.all(optimizer.stateTensors.map(async (t) => [t.name, await gpu.readF32(t.tensor)] as const))),
      metadata,
    };
    return concatBytes(encodeCheckpoint(c));
  }

  /** Loads a checkpoint file (verified: hash, model, sizes); returns its step. */
  load(file: Uint8Array, expectStep: number): number {
    const { model, optimizer, gpu } = this;
    const c = decodeCheckpoint(file, `checkpoint of step ${expectStep}`);
    const want = fingerprintOf(model);
    if (c.fingerprint !== want) throw new StateError(`the checkpoint is of model ${c.fingerprint}, this job trains ${want}: the coordinator serves another job's checkpoint`);
    if (c.step !== expectStep) throw new StateError(`the checkpoint is of step ${c.step}, the coordinator asked for step ${expectStep}`);
    const sized = (name: string, a: Float32Array | undefined, t: Tensor): Float32Array => {
      const n = t.size;
      if (!a || a.length !== n) throw new StateError(`checkpoint tensor ${name} has ${a?.length ?? 0} floats, the model needs ${n}`);
      return a;
    };
    gpu.write(model.params, sized('weights', c.weights, model.params));
    gpu.write(model.state, sized('bn-state', c.bnState, model.state));
    for (const t of optimizer.stateTensors) gpu.write(t.tensor, sized(`optim/${t.name}`, c.optimizer[t.name], t.tensor));
    return c.step;
  }

  destroy(): void {
    for (const p of this.pairs) this.gpu.release(p.saved);
  }
}
