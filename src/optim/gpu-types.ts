// The GPU optimiser's interface (optimizer.ts implements it): what one step records and the state
// it owns, over WebGPU tensors. The configs and the parameter segments it runs over are types.ts's,
// which the host step, the references and the protocol share without any WebGPU code.
import type { Tensor } from '../gpu/tensor.ts';
import type { OptimizerConfig } from './types.ts';

export interface StepArgs {
  /** Parameters, updated in place. */
  w: Tensor;
  /** Gradient SUM over the global batch (not modified). */
  g: Tensor;
  /** 0-based step index: selects the scheduled rate. */
  t: number;
  /** Multiplies G inside the kernel (1 / global batch size), so g = G * gradScale. */
  gradScale: number;
}

export interface NamedTensor {
  name: string;
  tensor: Tensor;
}

/**
 * An optimiser over one layout. It owns its state (the momentum buffer V, zero at creation)
 * and its small tables; `step` only records GPU work (no readback), so it fits in the same
 * batch as the backward pass. Every peer that runs the same steps on the same inputs on the
 * same kind of device gets bit-identical weights (fixed order, no atomics).
 */
export interface Optimizer {
  readonly config: OptimizerConfig;
  /** For checkpoints: [{ name: 'momentum', tensor: V }], V with the parameter layout. */
  readonly stateTensors: readonly NamedTensor[];
  /** The scheduled global rate for step t (computed on the CPU, passed as a uniform). */
  rate(t: number): number;
  step(args: StepArgs): void;
  /** Returns the state and tables to the GPU pool. The optimiser is unusable afterwards. */
  destroy(): void;
}
