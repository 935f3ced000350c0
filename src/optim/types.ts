// The optimiser's view of a model: one flat f32 parameter buffer W, one flat gradient buffer G
// (the SUM over the global batch, already summed over peers) and one flat momentum buffer V,
// all with the same layout. Each parameter tensor is a segment of them.

/**
 * One parameter tensor of the flat buffers. src/nn/layout.ts's ParamTensor has these fields,
 * so `layout.params` can be passed as it is. Offsets should be 64-float aligned (the layout
 * does that); the optimiser only needs segments to be disjoint and inside the buffers.
 */
export interface ParamSegment {
  name: string;
  /** Element offset into the flat buffers. */
  offset: number;
  /** Element count. */
  length: number;
  /** LARS adapts this tensor's rate; otherwise its trust ratio lambda is 1 (but see trustFrom). */
  adapt: boolean;
  /** Weight decay applies to this tensor; otherwise beta is 0 for it. */
  decay: boolean;
  /**
   * LARS, a tensor not adapted itself: it steps at the trust ratio of segment `trustFrom` (an
   * index into the same segment list: its layer's weight, which must be adapted) instead of 1.
   * Absent: lambda 1, the global rate. Only the host optimiser (host.ts) implements it.
   */
  trustFrom?: number;
}

export type OptimizerKind = 'lars' | 'sgd';
export type ScheduleKind = 'poly' | 'constant' | 'step';

/** The learning-rate schedule (pure data; see schedule.ts for the formulas). */
export interface ScheduleConfig {
  schedule: ScheduleKind;
  /** gamma_0: the rate at the end of warm-up. */
  lr: number;
  /** W: linear warm-up steps (0: none). */
  warmupSteps: number;
  /** The warm-up starts at lr * warmupStartFactor (0 by default). */
  warmupStartFactor: number;
  /** T: 'poly' reaches 0 at step T; every schedule gives 0 from T on. */
  totalSteps: number;
  /** 'poly' exponent (2 in You, Gitman, Ginsburg 2017). */
  power: number;
  /** 'step': the rate is multiplied by stepFactor at each of these steps (increasing, > W). */
  stepMilestones: number[];
  stepFactor: number;
}

/** What a job config carries (validated by parseOptimizerConfig). */
export interface OptimizerConfig extends ScheduleConfig {
  kind: OptimizerKind;
  /** m. */
  momentum: number;
  /** beta (LARS) / wd (SGD), applied to segments with decay = true. */
  weightDecay: number;
  /** LARS trust coefficient eta (unused by SGD). */
  eta: number;
  /** SGD only: Nesterov momentum. */
  nesterov: boolean;
  /**
   * LARS: the rate of a conv / linear bias that is not adapted itself: 'global' (the global
   * rate) or 'layer' (its layer weight's trust ratio). Applied through the model's layout
   * (src/nn/layout.ts biasTrust, ParamSegment.trustFrom), which a volunteer builds from it.
   */
  biasTrust: 'global' | 'layer';
}
