// createOptimizer: LARS or SGD with momentum over one parameter layout. The object owns the
// momentum buffer V (zeros at creation), the segment tables (uploaded once) and LARS's norms
// scratch; step() records, with no readback:
//   lars: sumSquaresSegments(W, G) -> ||w||^2, ||G||^2 per segment, then one update dispatch
//         per binding window
//   sgd:  one update dispatch per binding window
// A layout that fits one storage binding has one window; a larger one (AlexNet, 244 MB) is
// walked in windows of whole segments, a segment larger than a binding split across windows.
import { check } from '../errors.ts';
import type { Gpu } from '../gpu/runtime.ts';
import { shapeStr, type Tensor } from '../gpu/tensor.ts';
import { maxBindingElems, releaseSegmentTable, segmentTable, sumSquaresSegments, type SegmentTable } from '../ops/reduce.ts';
import { OptimError } from './errors.ts';
import { larsUpdate, sgdUpdate, type UpdateBuffers, type UpdateScalars } from './kernels.ts';
import { learningRate } from './schedule.ts';
import { buildUpdateTable, ROW_U32, type UpdateWindow } from './table.ts';
import type { OptimizerConfig, ParamSegment } from './types.ts';
import type { NamedTensor, Optimizer, StepArgs } from './gpu-types.ts';

class FlatOptimizer implements Optimizer {
  readonly stateTensors: readonly NamedTensor[];
  private readonly v: Tensor;
  private readonly table: Tensor;
  private readonly windows: readonly UpdateWindow[];
  private readonly S: number;
  /** LARS only: the norms' segment table and their output. */
  private readonly normTable: SegmentTable | null;
  private readonly norms: Tensor | null;
  private readonly gsqBase: number;
  private destroyed = false;

  constructor(
    private readonly gpu: Gpu,
    readonly config: OptimizerConfig,
    segments: readonly ParamSegment[],
    readonly paramFloats: number,
  ) {
    const borrowed = config.kind === 'lars' ? segments.find((s) => s.trustFrom !== undefined) : undefined;
    if (borrowed) {
      throw new OptimError('bad-layout', `segment '${borrowed.name}' takes its layer's trust ratio (trustFrom), `
        + 'which only the host optimiser (src/optim/host.ts, the step every volunteer runs) implements; '
        + "build this layout with biasTrust 'global' for the GPU optimizer");
    }
    const align = gpu.limits.minStorageBufferOffsetAlignment / 4;
    const t = buildUpdateTable(segments, paramFloats, { maxElems: maxBindingElems(gpu), align });
    this.S = segments.length;
    this.windows = t.windows;
    const R = t.rows.length / ROW_U32;
    // A zero-row table still needs a non-empty buffer; the kernels skip windows with no rows.
    this.table = gpu.upload(R > 0 ? t.rows : new Uint32Array(ROW_U32), [Math.max(1, R), ROW_U32], 'optim.rows');
    this.v = gpu.zeros([paramFloats], 'f32', 'optim.momentum');
    this.stateTensors = [{ name: 'momentum', tensor: this.v }];
    if (config.kind === 'lars' && this.S > 0) {
      // ||g||^2 goes at an aligned offset of the same buffer so both outputs can be views.
      this.gsqBase = Math.ceil(this.S / align) * align;
      this.normTable = segmentTable(gpu, t.norms, paramFloats);
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
    if (!Number.isFinite(gradScale) || gradScale <= 0) {
      throw new OptimError('bad-input', `gradScale must be a finite number > 0 (1 / global batch), got ${gradScale}`);
    }
    const n = this.paramFloats;
    check(w.dtype === 'f32' && g.dtype === 'f32' && w.size === n && g.size === n, 'optimizer.step',
      () => `w and g must be f32 [${n}] (the layout's paramFloats), got w ${w.dtype} ${shapeStr(w.shape)}, g ${g.dtype} ${shapeStr(g.shape)}`);
    const c = this.config;
    const gpu = this.gpu;
    const k: UpdateScalars = { lr: this.rate(t), momentum: c.momentum, weightDecay: c.weightDecay, gradScale };
    const bufs = (win: UpdateWindow): UpdateBuffers => ({
      w: gpu.view(w, win.base, [win.size]),
      g: gpu.view(g, win.base, [win.size]),
      v: gpu.view(this.v, win.base, [win.size]),
      table: this.table,
      window: win,
    });
    if (c.kind === 'sgd') {
      for (const win of this.windows) sgdUpdate(gpu, bufs(win), k, c.nesterov);
      return;
    }
    if (this.norms === null || this.normTable === null) return; // no segments: nothing to update
    // Every window's update reads the norms of whole segments, so all norms come first.
    sumSquaresSegments(gpu, this.normTable, [w, g], [gpu.view(this.norms, 0, [this.S]), gpu.view(this.norms, this.gsqBase, [this.S])]);
    for (const win of this.windows) larsUpdate(gpu, bufs(win), this.norms, this.S, this.gsqBase, k, c.eta);
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.gpu.release(this.v, this.table, this.norms);
    if (this.normTable !== null) releaseSegmentTable(this.gpu, this.normTable);
  }
}

/**
 * An optimiser for flat buffers of `paramFloats` floats laid out as `segments` (pass
 * `layout.params` and `layout.paramFloats` from src/nn/layout.ts). Uploads its tables, so
 * it flushes recorded GPU work: create it once per layout, not per step, under the binding
 * limit (gpu.maxBindingBytes) it will run with.
 */
export function createOptimizer(gpu: Gpu, config: OptimizerConfig, segments: readonly ParamSegment[], paramFloats: number): Optimizer {
  return new FlatOptimizer(gpu, config, segments, paramFloats);
}
