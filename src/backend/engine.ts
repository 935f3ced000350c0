// The op interface every compute backend implements: the model (src/nn/model.ts), the
// training step and the volunteer only talk to an Engine, never to WebGPU or WebAssembly
// directly. Two engines exist: 'webgpu' (src/backend/webgpu.ts: the WGSL kernels of src/ops
// on a Gpu) and 'wasm' (src/wasm/: WebAssembly SIMD kernels on the CPU).
//
// Semantics are those of src/ops (each op's file documents shapes and layout; every op has
// a float64 reference in src/ref). Work is RECORDED: an engine may run an op at once (wasm)
// or queue it until flush() (webgpu); only read()/readF32() wait for results. Tensors are
// views (offset, shape) into buffers the engine owns; view() of a view is relative to it.
import type { BatchNormBackwardParams, BatchNormParams } from '../shapes/batchnorm.ts';
import type { BiasBackwardParams } from '../shapes/bias.ts';
import type { Conv2dBackwardOptions, Conv2dParams } from '../shapes/conv2d.ts';
import type { DropoutParams } from '../shapes/dropout.ts';
import type { GemmParams } from '../shapes/gemm.ts';
import type { LrnParams } from '../shapes/lrn.ts';
import type { Pool2dParams } from '../shapes/pool.ts';
import type { SoftmaxXentParams } from '../shapes/softmax_xent.ts';
import type { TopkParams } from '../shapes/topk.ts';

export type DType = 'f32' | 'i32' | 'u32';
export type HostArray = Float32Array | Int32Array | Uint32Array;
export type BackendKind = 'webgpu' | 'wasm';
/** A volunteer's setting: a backend, or 'auto' (the faster one measured on the device). */
export type BackendPreference = 'auto' | BackendKind;
export const BACKEND_PREFERENCES: readonly BackendPreference[] = ['auto', 'webgpu', 'wasm'];

/** What every engine's tensors have; each engine adds its own handle to the storage. */
export interface TensorLike {
  readonly shape: readonly number[];
  /** Number of elements (product of shape). */
  readonly size: number;
  readonly dtype: DType;
}

export interface EngineInfo {
  backend: BackendKind;
  platform: 'node' | 'browser';
  /** Human-readable device: adapter name, or e.g. 'WebAssembly SIMD, 2 threads'. */
  description: string;
  /** True where the engine runs on the CPU (software WebGPU, or wasm). */
  cpu: boolean;
}

/** Every op the models need, forward and backward (argument order as in src/ops). */
export interface Ops<T extends TensorLike> {
  gemm(a: T, b: T, c: T, p?: GemmParams): void;
  conv2dForward(x: T, w: T, y: T, p: Conv2dParams): void;
  conv2dBackwardInput(dy: T, w: T, dx: T, p: Conv2dParams, o?: Conv2dBackwardOptions): void;
  conv2dBackwardFilter(x: T, dy: T, dw: T, p: Conv2dParams, o?: Conv2dBackwardOptions): void;
  biasAddInPlace(x: T, b: T): void;
  biasBackward(dy: T, db: T, p: BiasBackwardParams): void;
  reluForward(x: T, y: T): void;
  reluBackward(x: T, dy: T, dx: T): void;
  /**
   * Optional fusions of a bias and the ReLU after it (src/nn/model.ts uses them when an engine has both), each one
   * pass over memory with the bits of the ops it replaces: y = max(x + b, 0) (x unchanged), biasAddInPlace then
   * reluForward; and dx = y > 0 ? dy : 0 with db (+)= its sums, y the ReLU's output, reluBackward then biasBackward.
   */
  biasRelu?(x: T, b: T, y: T): void;
  reluBiasBackward?(y: T, dy: T, dx: T, db: T, p: BiasBackwardParams): void;
  add(x: T, y: T, z: T): void;
  addInPlace(x: T, y: T): void;
  fill(x: T, value: number): void;
  maxPoolForward(x: T, y: T, argmax: T, p: Pool2dParams): void;
  maxPoolBackward(dy: T, argmax: T, dx: T, p: Pool2dParams): void;
  /**
   * Optional: the backward of a max pool whose input is a biasRelu's output y, and of that bias and ReLU, in one op with
   * their bits: maxPoolBackward, then reluBiasBackward on its result (dx = y > 0 ? the pool's gradient : 0, db (+)= its
   * sums); each plane's pool gradient is masked while in cache, not written to memory and read back.
   */
  poolReluBiasBackward?(dy: T, argmax: T, y: T, dx: T, db: T, p: Pool2dParams & BiasBackwardParams): void;
  avgPoolForward(x: T, y: T, p: Pool2dParams): void;
  avgPoolBackward(dy: T, dx: T, p: Pool2dParams): void;
  globalAvgPoolForward(x: T, y: T): void;
  globalAvgPoolBackward(dy: T, dx: T): void;
  batchNormForward(x: T, gamma: T, beta: T, runningMean: T, runningVar: T, y: T, mean: T, invstd: T, p: BatchNormParams): void;
  batchNormInference(x: T, gamma: T, beta: T, runningMean: T, runningVar: T, y: T, p: { eps: number }): void;
  batchNormBackward(x: T, dy: T, gamma: T, mean: T, invstd: T, dx: T, dgamma: T, dbeta: T, p: BatchNormBackwardParams): void;
  /**
   * Optional fusions of a BN and the ReLU after it (src/nn/model.ts uses them when an engine has all three), with the
   * bits of the ops they replace: the forward and inference write max(BN(x), 0); the backward takes dy, the ReLU's
   * output gradient, as 0 where BN(x), recomputed from x, the statistics, gamma and beta, is not > 0.
   */
  batchNormReluForward?(x: T, gamma: T, beta: T, runningMean: T, runningVar: T, y: T, mean: T, invstd: T, p: BatchNormParams): void;
  batchNormReluInference?(x: T, gamma: T, beta: T, runningMean: T, runningVar: T, y: T, p: { eps: number }): void;
  batchNormReluBackward?(x: T, dy: T, gamma: T, beta: T, mean: T, invstd: T, dx: T, dgamma: T, dbeta: T, p: BatchNormBackwardParams): void;
  lrnForward(x: T, y: T, p: LrnParams): void;
  lrnBackward(x: T, y: T, dy: T, dx: T, p: LrnParams): void;
  dropoutForward(x: T, y: T, p: DropoutParams): void;
  dropoutBackward(dy: T, dx: T, p: DropoutParams): void;
  softmaxXent(logits: T, labels: T, dlogits: T, losses: T, total: T, p: SoftmaxXentParams): void;
  topkCount(logits: T, labels: T, counts: T, p?: TopkParams): void;
}

/** What an engine holds and can hold (src/nn/fit.ts sizes micro-batches from it). */
export interface EngineMemory {
  /** Bytes of the engine's live tensors and scratch now. */
  usedBytes: number;
  /** The most usedBytes has been since the last resetPeak(). */
  peakBytes: number;
  /** The most the engine can hold (wasm: its memory's maximum); null where the device does not say (WebGPU). */
  limitBytes: number | null;
  /** The largest single tensor it can make. */
  maxTensorBytes: number;
}

/** Memory and scheduling: what the model needs besides the ops. */
export interface Engine<T extends TensorLike> extends Ops<T> {
  readonly info: EngineInfo;
  /**
   * Element alignment of views into flat buffers (parameter layouts pad tensors to it):
   * the GPU's minStorageBufferOffsetAlignment / 4; 4 floats (16 bytes, one v128) for wasm.
   */
  readonly viewAlign: number;
  empty(shape: readonly number[], dtype?: DType, label?: string): T;
  zeros(shape: readonly number[], dtype?: DType, label?: string): T;
  upload(data: HostArray, shape?: readonly number[], label?: string): T;
  write(t: T, data: HostArray, elemOffset?: number): void;
  /** Elements [start, start + size(shape)) of t as a tensor of that shape (same storage). */
  view(t: T, start: number, shape: readonly number[]): T;
  copy(src: T, dst: T): void;
  /**
   * Returns tensors made by empty/zeros/upload to the engine, once each. Never a view: the
   * wasm engine refuses one (and a second release), the WebGPU engine would free the whole
   * buffer under it.
   */
  release(...ts: (T | null | undefined)[]): void;
  read(t: T): Promise<HostArray>;
  readF32(t: T): Promise<Float32Array>;
  /**
   * Copies t (f32) into dst from element `offset`, as readF32 then dst.set would: the wasm engine
   * copies straight from its memory, with no array in between (ResNet-50's gradient is 100 MB a step).
   */
  readF32Into(t: T, dst: Float32Array, offset: number): Promise<void>;
  /** Submits recorded work (a no-op where ops run at once). */
  flush(): void;
  memory(): EngineMemory;
  /** Starts a new peak of memory() at what is used now (no op may be running; the wasm engine gives back its kernels' scratch first). */
  resetPeak(): void;
  destroy(): void;
}

/** An engine of either kind, for code that never touches its tensors' storage. */
export type AnyEngine = Engine<TensorLike>;
