// The public API of the engine: get a device, run ops on it, read results back, and compare
// with the float64 references. Example:
//
//   import { getDevice, ops } from 'volunteer-trainer';
//   const gpu = await getDevice();
//   const a = gpu.upload(new Float32Array(6).fill(1), [2, 3]);
//   const b = gpu.upload(new Float32Array(12).fill(2), [3, 4]);
//   const c = gpu.empty([2, 4]);
//   ops.gemm(gpu, a, b, c);                 // recorded, not yet run
//   console.log(await gpu.readF32(c));      // submits, waits, reads: all 6s
//
// Ops write into tensors the caller provides and never read back; gpu.read*() and gpu.sync()
// are the only points that wait for the GPU.

export { getDevice, WEBGPU_HELP, type DeviceOptions } from './gpu/device.ts';
export { Gpu, foldWorkgroups, type GpuInfo, type Kernel, type DispatchSpec, type Constants } from './gpu/runtime.ts';
export { type Tensor, type DType, reshape, sizeOf } from './gpu/tensor.ts';
export { GEMM_CANDIDATES, gemmConfig, setGemmConfig, type GemmConfig } from './gpu/tune.ts';
export { VtError, type VtErrorKind } from './errors.ts';
export { makeRng, hash32, type Rng } from './rng.ts';

/** GPU ops: `xForward(gpu, inputs..., out, params)`, `xBackward(...)`. */
export * as ops from './ops/index.ts';
/** float64 CPU references of the same ops (Float64Array in, Float64Array out). */
export * as ref from './ref/index.ts';

export { GraphBuilder, inferShapes, type ModelSpec, type NodeSpec } from './nn/graph.ts';
export { layoutOf, initParams, initState, summary, type Layout, type ParamTensor } from './nn/layout.ts';
export { Model } from './nn/model.ts';
export { MODEL_NAMES, modelByName, smallCnn, resnet20, resnet50, alexnet, type ModelName } from './nn/models.ts';
export { autotuneGemm } from './ops/gemm-tune.ts';
