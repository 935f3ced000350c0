// createOptimizer: LARS or SGD with momentum over one parameter layout. The object owns the
// momentum buffer V (zeros at creation), the segment tables (uploaded once) and LARS's norms
// scratch; step() records, with no readback:
//   lars: sumSquaresSegments(W, G) -> ||w||^2, ||G||^2 per segment, then one update dispatch
//   sgd:  one update dispatch
import type { Gpu } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { segmentTable, sumSquaresSegments } from '../ops/reduce.ts';
import { OptimError } from './errors.ts';
import { larsUpdate, sgdUpdate, type UpdateBuffers } from './kernels.ts';
import { learningRate } from './schedule.ts';
import { buildUpdateTable } from './table.ts';
import type { NamedTensor, Optimizer, OptimizerConfig, ParamSegment, StepArgs } from './types.ts';

class FlatOptimizer implements Optimizer {
  readonly stateTensors: readonly NamedTensor[];
  private readonly v: Tensor;
  private readonly table: Tensor;
  private readonly chunks: number;
  private readonly S: number;
  /** LARS only: (offset, length) table for the norms and their scratch. */
  private readonly normTable: Tensor | null;
  private readonly norms: Tensor | null;
  private readonly gsqBase: number;
  private destroyed = false;

  constructor(
    private readonly gpu: Gpu,
    readonly config: OptimizerConfig,
    segments: readonly ParamSegment[],
    readonly paramFloats: number,
  ) {
    const t = buildUpdateTable(segments, paramFloats);
    this.S = segments.length;
    this.chunks = t.chunks;
    // A zero-row table still needs a non-empty buffer; the kernels skip S = 0.
    this.table = gpu.upload(this.S > 0 ? t.rows : new Uint32Array(4), [Math.max(1, this.S), 4], 'optim.segments');
    this.v = gpu.zeros([paramFloats], 'f32', 'optim.momentum');
    this.stateTensors = [{ name: 'momentum', tensor: this.v }];
    if (config.kind === 'lars' && this.S > 0) {
      // ||g||^2 goes at an aligned offset of the same buffer so both outputs can be views.
      const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
      this.gsqBase = Math.ceil(this.S / align) * align;
      this.normTable = segmentTable(gpu, t.norms);
      this.norms = gpu.empty([this.gsqBase + this.S], 'f32', 'optim.norms');
    } else {
      this.gsqBase = 0;
      this.normTable = null;
      this.norms = null;
    }
  }

  rate(t: number): number {
    return learningRate(this.config, t);
  }

  step({ w, g, t, gradScale }: StepArgs): void {
    if (this.destroyed) throw new OptimError('bad-input', 'step() after destroy()');
    if (!Number.isFinite(gradScale) || gradScale <= 0) throw new OptimError('bad-input', `gradScale must be a finite number > 0 (1 / global batch), got ${gradScale}`);
    const c = this.config;
    const bufs: UpdateBuffers = { w, g, v: this.v, table: this.gpu.view(this.table, 0, [this.S, 4]), chunks: this.chunks };
    const k = { lr: this.rate(t), momentum: c.momentum, weightDecay: c.weightDecay, gradScale };
    if (c.kind === 'sgd') {
      sgdUpdate(this.gpu, bufs, k, c.nesterov);
      return;
    }
    if (this.norms === null || this.normTable === null) return; // no segments: nothing to update
    const gpu = this.gpu;
    sumSquaresSegments(gpu, this.normTable, [w, g], [gpu.view(this.norms, 0, [this.S]), gpu.view(this.norms, this.gsqBase, [this.S])]);
    larsUpdate(gpu, bufs, this.norms, this.gsqBase, k, c.eta);
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.gpu.release(this.v, this.table, this.normTable, this.norms);
  }
}

/**
 * An optimiser for flat buffers of `paramFloats` floats laid out as `segments` (pass
 * `layout.params` and `layout.paramFloats` from src/nn/layout.ts). Uploads its tables, so
 * it flushes recorded GPU work: create it once per layout, not per step.
 */
export function createOptimizer(gpu: Gpu, config: OptimizerConfig, segments: readonly ParamSegment[], paramFloats: number): Optimizer {
  return new FlatOptimizer(gpu, config, segments, paramFloats);
}
