// The WebGPU engine: the WGSL ops of src/ops on one Gpu (src/gpu/runtime.ts), behind the
// Engine interface. Ops are recorded into the Gpu's command stream until flush().
import type { Gpu } from '../gpu/runtime.ts';
import type { Tensor } from '../gpu/tensor.ts';
import * as ops from '../ops/index.ts';
import type { DType, Engine, EngineInfo, EngineMemory, HostArray } from './engine.ts';

export class WebGpuEngine implements Engine<Tensor> {
  readonly info: EngineInfo;
  readonly viewAlign: number;

  constructor(readonly gpu: Gpu) {
    this.info = { backend: 'webgpu', platform: gpu.info.platform, description: gpu.info.description || gpu.info.backend, cpu: gpu.info.software };
    this.viewAlign = gpu.limits.minStorageBufferOffsetAlignment / 4;
  }

  empty(shape: readonly number[], dtype?: DType, label?: string): Tensor { return this.gpu.empty(shape, dtype, label); }
  zeros(shape: readonly number[], dtype?: DType, label?: string): Tensor { return this.gpu.zeros(shape, dtype, label); }
  upload(data: HostArray, shape?: readonly number[], label?: string): Tensor { return this.gpu.upload(data, shape, label); }
  write(t: Tensor, data: HostArray, elemOffset?: number): void { this.gpu.write(t, data, elemOffset); }
  view(t: Tensor, start: number, shape: readonly number[]): Tensor { return this.gpu.view(t, start, shape); }
  copy(src: Tensor, dst: Tensor): void { this.gpu.copy(src, dst); }
  release(...ts: (Tensor | null | undefined)[]): void { this.gpu.release(...ts); }
  read(t: Tensor): Promise<HostArray> { return this.gpu.read(t); }
  readF32(t: Tensor): Promise<Float32Array> { return this.gpu.readF32(t); }
  async readF32Into(t: Tensor, dst: Float32Array, offset: number): Promise<void> {
    dst.set(await this.gpu.readF32(t), offset);
  }
  flush(): void { this.gpu.flush(); }
  memory(): EngineMemory {
    const s = this.gpu.pool.stats();
    return { usedBytes: s.liveBytes, peakBytes: s.peakBytes, limitBytes: null, maxTensorBytes: this.gpu.limits.maxBufferSize };
  }
  resetPeak(): void { this.gpu.pool.resetPeak(); }
  destroy(): void { this.gpu.destroy(); }

  gemm(a: Tensor, b: Tensor, c: Tensor, p?: ops.GemmParams): void { ops.gemm(this.gpu, a, b, c, p); }
  conv2dForward(x: Tensor, w: Tensor, y: Tensor, p: ops.Conv2dParams): void { ops.conv2dForward(this.gpu, x, w, y, p); }
  conv2dBackwardInput(dy: Tensor, w: Tensor, dx: Tensor, p: ops.Conv2dParams, o?: ops.Conv2dBackwardOptions): void {
    ops.conv2dBackwardInput(this.gpu, dy, w, dx, p, o);
  }
  conv2dBackwardFilter(x: Tensor, dy: Tensor, dw: Tensor, p: ops.Conv2dParams, o?: ops.Conv2dBackwardOptions): void {
    ops.conv2dBackwardFilter(this.gpu, x, dy, dw, p, o);
  }
  biasAddInPlace(x: Tensor, b: Tensor): void { ops.biasAddInPlace(this.gpu, x, b); }
  biasBackward(dy: Tensor, db: Tensor, p: ops.BiasBackwardParams): void { ops.biasBackward(this.gpu, dy, db, p); }
  reluForward(x: Tensor, y: Tensor): void { ops.reluForward(this.gpu, x, y); }
  reluBackward(x: Tensor, dy: Tensor, dx: Tensor): void { ops.reluBackward(this.gpu, x, dy, dx); }
  add(x: Tensor, y: Tensor, z: Tensor): void { ops.add(this.gpu, x, y, z); }
  addInPlace(x: Tensor, y: Tensor): void { ops.addInPlace(this.gpu, x, y); }
  fill(x: Tensor, value: number): void { ops.fill(this.gpu, x, value); }
  maxPoolForward(x: Tensor, y: Tensor, argmax: Tensor, p: ops.Pool2dParams): void { ops.maxPoolForward(this.gpu, x, y, argmax, p); }
  maxPoolBackward(dy: Tensor, argmax: Tensor, dx: Tensor, p: ops.Pool2dParams): void { ops.maxPoolBackward(this.gpu, dy, argmax, dx, p); }
  avgPoolForward(x: Tensor, y: Tensor, p: ops.Pool2dParams): void { ops.avgPoolForward(this.gpu, x, y, p); }
  avgPoolBackward(dy: Tensor, dx: Tensor, p: ops.Pool2dParams): void { ops.avgPoolBackward(this.gpu, dy, dx, p); }
  globalAvgPoolForward(x: Tensor, y: Tensor): void { ops.globalAvgPoolForward(this.gpu, x, y); }
  globalAvgPoolBackward(dy: Tensor, dx: Tensor): void { ops.globalAvgPoolBackward(this.gpu, dy, dx); }
  batchNormForward(x: Tensor, gamma: Tensor, beta: Tensor, rm: Tensor, rv: Tensor, y: Tensor, mean: Tensor, invstd: Tensor, p: ops.BatchNormParams): void {
    ops.batchNormForward(this.gpu, x, gamma, beta, rm, rv, y, mean, invstd, p);
  }
  batchNormInference(x: Tensor, gamma: Tensor, beta: Tensor, rm: Tensor, rv: Tensor, y: Tensor, p: { eps: number }): void {
    ops.batchNormInference(this.gpu, x, gamma, beta, rm, rv, y, p);
  }
  batchNormBackward(
    x: Tensor, dy: Tensor, gamma: Tensor, mean: Tensor, invstd: Tensor, dx: Tensor, dgamma: Tensor, dbeta: Tensor, p: ops.BatchNormBackwardParams,
  ): void {
    ops.batchNormBackward(this.gpu, x, dy, gamma, mean, invstd, dx, dgamma, dbeta, p);
  }
  lrnForward(x: Tensor, y: Tensor, p: ops.LrnParams): void { ops.lrnForward(this.gpu, x, y, p); }
  lrnBackward(x: Tensor, y: Tensor, dy: Tensor, dx: Tensor, p: ops.LrnParams): void { ops.lrnBackward(this.gpu, x, y, dy, dx, p); }
  dropoutForward(x: Tensor, y: Tensor, p: ops.DropoutParams): void { ops.dropoutForward(this.gpu, x, y, p); }
  dropoutBackward(dy: Tensor, dx: Tensor, p: ops.DropoutParams): void { ops.dropoutBackward(this.gpu, dy, dx, p); }
  softmaxXent(logits: Tensor, labels: Tensor, dlogits: Tensor, losses: Tensor, total: Tensor, p: ops.SoftmaxXentParams): void {
    ops.softmaxXent(this.gpu, logits, labels, dlogits, losses, total, p);
  }
  topkCount(logits: Tensor, labels: Tensor, counts: Tensor, p?: ops.TopkParams): void { ops.topkCount(this.gpu, logits, labels, counts, p); }
}
