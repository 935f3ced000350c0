// A volunteer's side of low-communication rounds (job syncEvery H > 1; src/optim/outer.ts).
//
// A round assignment gives this peer its slice of each of the round's H' inner steps. From the
// round's start weights w0 it runs those inner steps with its own inner optimiser (the job's
// LARS or SGD, on its own slice: the gradient is divided by the slice's images), keeps
// images x (w0 - w) as its contribution, and puts w0 back: until the outer step the peer still
// holds the weights of the round's first step, so it can upload them or enter a new ring. The
// ring sums the contributions and every peer applies the same outer step.
//
// A member lost mid-round costs only its own images: the coordinator re-assigns the SAME round
// to the survivors in a new generation, and a survivor that already computed it (the same step
// and the same ids) reuses its contribution instead of redoing its inner steps. A survivor that
// had already applied the outer step undoes it first (w0 and the outer momentum come back).
// The inner momentum: without the job's momentumCarry it stays per peer across rounds, as in
// DiLoCo (joiners take the uploader's); with it, every peer sets it from the round's sum after
// the outer step (carriedMomentum), so all hold the same. A round computed again (re-assigned
// with other ids) starts from the inner momentum this peer held at the round's start.
import { carriedMomentum, outerStep, weightedChange, type OuterConfig } from '../optim/outer.ts';
import type { RoundAssignment } from '../protocol/messages.ts';
import { StateError, type TrainingState } from './state.ts';

/** One inner step's gradient SUM over `ids` and its loss sum (the volunteer computes it). */
export type InnerGradient = (ids: number[], epoch: number, step: number) => Promise<{ grads: Float32Array; lossSum: number }>;

/** A computed round, kept until the round commits (or a newer round starts). */
export interface RoundWork {
  step: number;
  /** Identifies the ids it was computed on: a re-assigned round is reused only when they match. */
  key: string;
  images: number;
  lossSum: number;
  computeMs: number;
  /** images x (w0 - w) after the inner steps. */
  change: Float32Array;
}

/** Identifies a round's ids (the step, and every inner step's slice). */
export function roundKey(step: number, a: RoundAssignment): string {
  let h = 0x811c9dc5;
  const mix = (v: number) => { h = Math.imul(h ^ v, 0x01000193) >>> 0; };
  for (const ids of a.ids) {
    mix(ids.length);
    for (const id of ids) mix(id);
  }
  return `${step}:${a.ids.length}:${h.toString(16)}`;
}

export class RoundState {
  /** The weights at the round's start. */
  private readonly w0: Float32Array;
  /** The outer momentum at the round's start. */
  private readonly savedU: Float32Array;
  /** The inner momentum at the start of the round `savedVStep` (a round computed again starts from it). */
  private readonly savedV: Float32Array;
  private savedVStep: number | null = null;
  private readonly u: Float32Array;
  /** This peer's computed round, until the next round begins. */
  private work: RoundWork | null = null;
  /** The round whose outer step is applied (undoable while the coordinator may re-run it). */
  private applied: number | null = null;

  constructor(private readonly state: TrainingState, readonly config: OuterConfig) {
    if (!state.u) throw new Error('RoundState needs a TrainingState made with rounds (syncEvery > 1)');
    this.u = state.u;
    this.w0 = new Float32Array(state.w.length);
    this.savedU = new Float32Array(state.w.length);
    this.savedV = new Float32Array(state.w.length);
  }

  /** Undoes the outer step of the round starting at `step`, if this peer applied it. */
  undo(step: number): boolean {
    if (this.applied !== step) return false;
    this.state.w.set(this.w0);
    this.u.set(this.savedU);
    this.state.model.engine.write(this.state.model.params, this.state.w);
    this.applied = null;
    return true;
  }

  /** A state was loaded (seed or checkpoint): nothing computed or applied belongs to it. */
  forget(): void {
    this.work = null;
    this.applied = null;
    this.savedVStep = null;
  }

  /**
   * This peer's contribution to the round at `step`: reused when it computed the same round
   * already, otherwise its inner steps run now (`gradient` computes one). Returns the work and
   * whether it was reused.
   */
  async contribution(step: number, a: RoundAssignment, gradient: InnerGradient): Promise<{ work: RoundWork; reused: boolean }> {
    const key = roundKey(step, a);
    if (this.work && this.work.key === key) return { work: this.work, reused: true };
    const { state } = this;
    const { engine } = state.model;
    this.w0.set(state.w);
    this.savedU.set(this.u);
    this.applied = null;
    // The same round again (other ids: a member was lost): from the inner momentum it began with.
    if (this.savedVStep === step) state.v.set(this.savedV);
    else {
      this.savedV.set(state.v);
      this.savedVStep = step;
    }
    const t0 = performance.now();
    let images = 0;
    let lossSum = 0;
    for (let k = 0; k < a.ids.length; k++) {
      const ids = a.ids[k]!;
      if (ids.length === 0) continue;
      const g = await gradient(ids, a.epochs[k]!, step + k);
      state.applyUpdate(g.grads, step + k, ids.length);
      images += ids.length;
      lossSum += g.lossSum;
    }
    const change = weightedChange(this.w0, state.w, images, this.work?.change.length === state.w.length ? this.work.change : new Float32Array(state.w.length));
    // Back to the round's start: the outer step goes from there (and an upload asked for now
    // must send the weights of `step`).
    state.w.set(this.w0);
    engine.write(state.model.params, state.w);
    this.work = { step, key, images, lossSum, computeMs: performance.now() - t0, change };
    return { work: this.work, reused: false };
  }

  /**
   * An audit (a verifying job): another member's contribution to the round at `step`, recomputed from the round's start
   * (w0, and the inner momentum the round began with, which the momentum carry makes every peer's) on its slice of each
   * inner step (`ids`, `epochs`); `gradient` computes an inner step as that member would. The weights and momentum are
   * put back as they were (the caller puts back what the forward passes move: batch norm's statistics). Runs between
   * contribution() of the same round and apply().
   */
  async recompute(step: number, ids: readonly number[][], epochs: readonly number[], gradient: InnerGradient): Promise<Float32Array> {
    if (this.savedVStep !== step || this.applied === step) {
      throw new StateError(`an audit of the round at step ${step + 1} needs that round's start here (computed, not yet applied)`);
    }
    const { state } = this;
    const v = state.v.slice();
    state.v.set(this.savedV);
    let images = 0;
    try {
      for (let k = 0; k < ids.length; k++) {
        const slice = ids[k]!;
        if (slice.length === 0) continue;
        const g = await gradient([...slice], epochs[k]!, step + k);
        state.applyUpdate(g.grads, step + k, slice.length);
        images += slice.length;
      }
      return weightedChange(this.w0, state.w, images, new Float32Array(state.w.length));
    } finally {
      state.w.set(this.w0);
      state.v.set(v);
      state.model.engine.write(state.model.params, state.w);
    }
  }

  /**
   * The outer step with the ring's `sum` of contributions over `images` images in `innerSteps`
   * inner steps. The peer holds w0 and the saved outer momentum here (contribution() put them
   * back, or undo() did), so the copies taken at the round's start stay the undo point. With a
   * momentum carry every peer's inner momentum is then set from the sum (the round done again
   * sets it again from its own sum).
   */
  apply(step: number, sum: Float32Array, images: number, innerSteps: number): void {
    const { state } = this;
    outerStep(this.config, state.w, this.u, sum, images);
    if (this.config.carry !== undefined) carriedMomentum(state.v, sum, images, innerSteps, state.config.momentum, this.config.carry);
    state.model.engine.write(state.model.params, state.w);
    this.applied = step;
  }
}
