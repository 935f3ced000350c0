// Optimisers over the flat parameter buffers: LARS (You, Gitman, Ginsburg 2017) and SGD with
// momentum, their schedules and the job config.
export { parseOptimizerConfig, OPTIMIZER_DEFAULTS } from './config.ts';
export { OptimError, type OptimErrorKind } from './errors.ts';
export { createOptimizer } from './optimizer.ts';
export { learningRate } from './schedule.ts';
export { hostOptimizerStep, type HostStepArgs } from './host.ts';
export type { OptimizerConfig, OptimizerKind, ParamSegment, ScheduleConfig, ScheduleKind } from './types.ts';
export type { NamedTensor, Optimizer, StepArgs } from './gpu-types.ts';
export { OUTER_DEFAULTS, AUTO_SYNC_MAX, MAX_SYNC_EVERY, checkOuterConfig, outerStep, weightedChange, type OuterConfig } from './outer.ts';
