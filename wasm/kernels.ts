// The WebAssembly SIMD kernels of the 'wasm' engine (src/wasm/engine.ts), one module.
//
// Why AssemblyScript rather than a kernel library (XNNPACK, a Rust/C crate): it is
// TypeScript-like, so the same engineers read and review it next to src/ops; it compiles from
// npm inside Node (scripts/build-wasm.mjs) with no system toolchain (no clang, emsdk or
// cargo on volunteers' or CI machines); and it exposes WebAssembly SIMD directly (v128,
// f32x4 intrinsics), so the GEMM micro-kernel is written exactly as the machine runs it.
// Built with -O3, SIMD, the stub runtime and an imported memory: kernels never allocate; the
// engine owns every byte (tensors and scratch) and passes byte addresses.
export { gemm, gemmNT, gemmNTRun, gemmPanels, gemmPanelsRun, gemmScratchBytes, gemmSeg, gemmSegNT } from './gemm';
export { im2col, col2imAdd, copyRows } from './conv';
export { add, fill, reluForward, reluBackward, biasAddInPlace, biasBackward, biasRelu, reluBiasBackward, dropout } from './eltwise';
export { maxPoolForward, maxPoolBackward, poolReluBackward, biasFromPlaneSums } from './pool';
export { avgPoolForward, avgPoolBackward, globalAvgPoolForward, globalAvgPoolBackward } from './pool';
export { batchNormSums, batchNormMean, batchNormVar, batchNormApply, lrnForward, lrnBackward } from './norm';
export { batchNormBackwardSums, batchNormBackwardReduce, batchNormBackwardApply } from './norm';
export { softmaxXent, topkCount } from './loss';
export { wgFilter, wgInputScratchBytes, wgInput, wgOutput, wgGradOut, wgFilterGrad } from './winograd';
export { wg4Filter, wg4ScratchBytes, wg4Input, wg4Output, wg4GradOut, wg4FilterGrad } from './winograd4';
export { optimNorms, optimSumW, optimSumG, optimUpdate } from './optim';

/** First byte the engine may use: everything below holds the module's static data. */
export function heapBase(): usize {
  return __heap_base;
}
