// float64 references, namespaced per op (their function names repeat across ops).
export * as gemm from './gemm.ts';
export * as conv2d from './conv2d.ts';
export * as relu from './relu.ts';
export * as bias from './bias.ts';
export * as eltwise from './eltwise.ts';
export * as pool from './pool.ts';
export * as batchnorm from './batchnorm.ts';
export * as lrn from './lrn.ts';
export * as dropout from './dropout.ts';
export * as softmaxXent from './softmax_xent.ts';
export * as topk from './topk.ts';
export * as reduce from './reduce.ts';
export * as model from './model.ts';
