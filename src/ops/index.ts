// All GPU ops, one module each (see each file for shapes and semantics).
export * from './gemm.ts';
export * from './conv2d.ts';
export * from './relu.ts';
export * from './bias.ts';
export * from './eltwise.ts';
export * from './pool.ts';
export * from './batchnorm.ts';
export * from './lrn.ts';
export * from './dropout.ts';
export * from './softmax_xent.ts';
export * from './topk.ts';
export * from './reduce.ts';
