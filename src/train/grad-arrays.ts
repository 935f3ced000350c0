// Host arrays of a model's flat gradient, reused from step to step. A fresh Float32Array is
// zero pages until first written: a ResNet-50 gradient (100 MB) costs its page faults on every
// step that allocates one (0.26-0.29 s on this project's 2-core host, against 7 ms to overwrite
// an array already touched; docs/wasm.md), and a sync step made two of them (the gradient read
// back and the kept sum). The volunteer takes its arrays here and gives each back once nothing
// reads it any more (src/client/volunteer-train.ts says when).
import { check } from '../errors.ts';

/** Arrays beyond this many given back are left to the garbage collector. */
const MAX_FREE = 4;

export class GradArrays {
  private readonly free: Float32Array[] = [];

  constructor(readonly floats: number) {
    check(Number.isInteger(floats) && floats >= 0, 'GradArrays', () => `a gradient has a whole number of floats, got ${floats}`);
  }

  /** An array of `floats` floats holding whatever its last user left: the caller writes every element before reading any. */
  take(): Float32Array {
    return this.free.pop() ?? new Float32Array(this.floats);
  }

  /** Gives `a` back for a later take(): neither the caller nor anything it handed `a` to may read or write it again. */
  give(a: Float32Array): void {
    check(a.length === this.floats, 'GradArrays.give', () => `an array of ${a.length} floats given back where the gradient has ${this.floats}`);
    check(!this.free.includes(a), 'GradArrays.give', () => 'an array given back twice');
    if (this.free.length < MAX_FREE) this.free.push(a);
  }

  /** Arrays waiting to be taken (tests). */
  get waiting(): number {
    return this.free.length;
  }
}
