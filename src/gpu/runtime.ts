// The GPU runtime: owns one GPUDevice, its buffer pool and pipeline cache, and records
// dispatches into one command encoder until flush(), so a whole training step runs with no
// CPU round-trip between layers. Ops (src/ops) call dispatch(); only read() waits on the GPU.
import { VtError } from '../errors.ts';
import { BufferPool } from './pool.ts';
import { type DType, type Tensor, sizeOf, shapeStr, binding } from './tensor.ts';
import { packUniforms, type Scalar } from './uniforms.ts';

/** A WGSL compute kernel: its source file and entry point. Constants are per dispatch. */
export interface Kernel {
  readonly name: string;
  readonly code: string;
  readonly entryPoint?: string;
}

export type Constants = Readonly<Record<string, number>>;

export interface DispatchSpec {
  kernel: Kernel;
  /** Override constants (workgroup and tile sizes): part of the pipeline cache key. */
  constants?: Constants;
  /**
   * Binding convention for every kernel: @binding(0) is the uniform struct, storage buffers
   * are @binding(1..n) in this array's order; null skips a binding the entry point does not use.
   */
  bindings: readonly (Tensor | null)[];
  uniforms: readonly Scalar[];
  /** Workgroup counts; use dispatch1d() for flat problems that may need folding. */
  workgroups: readonly [number, number?, number?];
}

export interface GpuInfo {
  platform: 'node' | 'browser';
  /** Which driver path: Node backends by name; in browsers 'webgpu'. */
  backend: string;
  /** True for software drivers (llvmpipe, SwiftShader), where register blocking beats workgroup tiling. */
  software: boolean;
  description: string;
}

// Read lazily: in Node the GPUBufferUsage global appears only after the 'webgpu' package loads.
const STORAGE = (): GPUBufferUsageFlags => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

export class Gpu {
  readonly device: GPUDevice;
  readonly info: GpuInfo;
  readonly limits: GPUSupportedLimits;
  readonly pool: BufferPool;
  /** Per-kernel override constants chosen for this adapter (see src/gpu/tune.ts). */
  readonly tuning = new Map<string, Constants>();
  /** Set to true to print every WGSL module as it is compiled. */
  static printWgsl = false;

  private readonly modules = new Map<string, GPUShaderModule>();
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private pendingDispatches = 0;
  private readonly transient: GPUBuffer[] = [];
  private readonly errors: string[] = [];
  private lostReason: string | null = null;
  dispatchCount = 0;
  /**
   * Largest storage binding ops may use: the device's limit by default. Ops split larger
   * operands; tests lower it to exercise the splitting on small shapes.
   */
  maxBindingBytes: number;

  constructor(device: GPUDevice, info: GpuInfo) {
    this.device = device;
    this.info = info;
    this.limits = device.limits;
    this.pool = new BufferPool(device);
    this.maxBindingBytes = device.limits.maxStorageBufferBindingSize;
    device.onuncapturederror = (ev: GPUUncapturedErrorEvent) => {
      this.errors.push(ev.error.message);
    };
    void device.lost.then((l) => {
      this.lostReason = `${l.reason}: ${l.message}`;
    });
  }

  /** Throws if the device was lost or WebGPU reported an error since the last check. */
  checkErrors(): void {
    if (this.lostReason !== null) {
      throw new VtError('device-lost', `The GPU device was lost (${this.lostReason}). Reload the page or restart the volunteer to get a new device.`);
    }
    if (this.errors.length > 0) {
      const msgs = this.errors.splice(0, this.errors.length);
      throw new VtError('gpu-validation', `WebGPU reported ${msgs.length} error(s): ${msgs.slice(0, 3).join(' | ')}`);
    }
  }

  // ---- tensors ---------------------------------------------------------------------------

  /** A new tensor from the pool (contents undefined). Free it with release(). */
  empty(shape: readonly number[], dtype: DType = 'f32', label = 'tensor'): Tensor {
    const size = sizeOf(shape);
    const bytes = Math.max(4, size * 4);
    if (bytes > this.limits.maxBufferSize) {
      throw new VtError('too-large', `${label} ${shapeStr(shape)} needs ${bytes} bytes, `
        + `more than this device's maxBufferSize ${this.limits.maxBufferSize}: use a smaller batch.`);
    }
    const buffer = this.pool.acquire(bytes, STORAGE(), label);
    return { buffer, offset: 0, shape: [...shape], size, dtype };
  }

  /** A tensor filled with zeros. */
  zeros(shape: readonly number[], dtype: DType = 'f32', label = 'zeros'): Tensor {
    const t = this.empty(shape, dtype, label);
    this.endPass();
    this.enc().clearBuffer(t.buffer, t.offset, t.size * 4);
    return t;
  }

  /** Uploads data to a new tensor. */
  upload(data: Float32Array | Int32Array | Uint32Array, shape: readonly number[] = [data.length], label = 'upload'): Tensor {
    const dtype: DType = data instanceof Float32Array ? 'f32' : data instanceof Int32Array ? 'i32' : 'u32';
    if (sizeOf(shape) !== data.length) throw new VtError('bad-shape', `upload: ${data.length} values do not fill shape ${shapeStr(shape)}`);
    const t = this.empty(shape, dtype, label);
    this.write(t, data);
    return t;
  }

  /** Writes data into an existing tensor (queue-ordered with recorded work after a flush). */
  write(t: Tensor, data: Float32Array | Int32Array | Uint32Array, elemOffset = 0): void {
    if (elemOffset + data.length > t.size) throw new VtError('bad-shape', `write: ${data.length} values at ${elemOffset} overflow a tensor of ${t.size}`);
    // Work recorded before this write must be submitted first, or the write would overtake it.
    this.flush();
    this.device.queue.writeBuffer(t.buffer, t.offset + elemOffset * 4, data.buffer, data.byteOffset, data.byteLength);
  }

  /** A view of `count` elements starting at element `start` (byte offset must be aligned). */
  view(t: Tensor, start: number, shape: readonly number[]): Tensor {
    const size = sizeOf(shape);
    const offset = t.offset + start * 4;
    if (start < 0 || start + size > t.size) throw new VtError('bad-shape', `view [${start}, ${start + size}) is outside a tensor of ${t.size} elements`);
    if (offset % this.limits.minStorageBufferOffsetAlignment !== 0) {
      throw new VtError('bad-shape', `view at byte ${offset} is not a multiple of ${this.limits.minStorageBufferOffsetAlignment}: `
        + `align tensors in flat buffers to ${this.limits.minStorageBufferOffsetAlignment / 4} floats`);
    }
    return { buffer: t.buffer, offset, shape: [...shape], size, dtype: t.dtype };
  }

  /** Returns the tensor's buffer to the pool (only for tensors from empty/zeros/upload). */
  release(...ts: (Tensor | null | undefined)[]): void {
    for (const t of ts) if (t) this.pool.release(t.buffer);
  }

  /** Reads a tensor back to the CPU. Submits all recorded work first. */
  async read(t: Tensor): Promise<Float32Array | Int32Array | Uint32Array> {
    const bytes = Math.max(4, t.size * 4);
    const staging = this.device.createBuffer({ size: Math.ceil(bytes / 4) * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: 'readback' });
    this.endPass();
    this.enc().copyBufferToBuffer(t.buffer, t.offset, staging, 0, bytes);
    this.flush();
    try {
      await staging.mapAsync(GPUMapMode.READ);
    } catch (e) {
      this.checkErrors();
      throw e;
    }
    this.checkErrors();
    const copy = staging.getMappedRange().slice(0);
    staging.unmap();
    staging.destroy();
    const n = t.size;
    if (t.dtype === 'f32') return new Float32Array(copy, 0, n);
    if (t.dtype === 'i32') return new Int32Array(copy, 0, n);
    return new Uint32Array(copy, 0, n);
  }

  async readF32(t: Tensor): Promise<Float32Array> {
    const r = await this.read(t);
    if (!(r instanceof Float32Array)) throw new VtError('bad-shape', `readF32 on a ${t.dtype} tensor`);
    return r;
  }

  /** Copies src into dst (same element count) inside the current batch. */
  copy(src: Tensor, dst: Tensor): void {
    if (src.size !== dst.size) throw new VtError('bad-shape', `copy: ${src.size} elements into ${dst.size}`);
    this.endPass();
    this.enc().copyBufferToBuffer(src.buffer, src.offset, dst.buffer, dst.offset, src.size * 4);
  }

  // ---- pipelines and dispatch --------------------------------------------------------------

  pipeline(kernel: Kernel, constants: Constants = {}): GPUComputePipeline {
    const entryPoint = kernel.entryPoint ?? 'main';
    const keys = Object.keys(constants).sort();
    // Cache key: kernel, entry point and override constants. Never runtime shapes.
    const key = `${kernel.name}#${entryPoint}#${keys.map((k) => `${k}=${constants[k]}`).join(',')}`;
    let p = this.pipelines.get(key);
    if (p) return p;
    let module = this.modules.get(kernel.name);
    if (!module) {
      if (Gpu.printWgsl) console.log(`// ---- ${kernel.name}.wgsl\n${kernel.code}`);
      module = this.device.createShaderModule({ code: kernel.code, label: kernel.name });
      this.modules.set(kernel.name, module);
    }
    p = this.device.createComputePipeline({
      layout: 'auto',
      label: key,
      compute: { module, entryPoint, constants: { ...constants } },
    });
    this.pipelines.set(key, p);
    return p;
  }

  get pipelineCount(): number {
    return this.pipelines.size;
  }

  /** Records one dispatch into the current batch. Nothing runs until flush() or read(). */
  dispatch(spec: DispatchSpec): void {
    const [x, y = 1, z = 1] = spec.workgroups;
    if (x === 0 || y === 0 || z === 0) return;
    const maxDim = this.limits.maxComputeWorkgroupsPerDimension;
    if (x > maxDim || y > maxDim || z > maxDim) {
      throw new VtError('too-large', `${spec.kernel.name}: dispatch ${x}x${y}x${z} exceeds ${maxDim} workgroups per dimension (use dispatch1d to fold)`);
    }
    const pipeline = this.pipeline(spec.kernel, spec.constants);
    const data = packUniforms(spec.uniforms);
    const ub = this.pool.acquire(data.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, `${spec.kernel.name}.uniforms`);
    this.device.queue.writeBuffer(ub, 0, data);
    this.transient.push(ub);
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: ub, offset: 0, size: data.byteLength } }];
    spec.bindings.forEach((t, i) => {
      if (t) entries.push({ binding: i + 1, resource: binding(t) });
    });
    const group = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries, label: spec.kernel.name });
    const pass = this.computePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(x, y, z);
    this.dispatchCount++;
    // Keep batches bounded: a very long step is submitted in pieces (still no readback).
    if (++this.pendingDispatches >= 512) this.flush();
  }

  /**
   * A flat problem of `n` workgroups, folded into (x, y) when n exceeds the per-dimension
   * limit. Kernels recover the flat id as wid.x + wid.y * num_workgroups.x and bounds-check.
   */
  dispatch1d(spec: Omit<DispatchSpec, 'workgroups'>, n: number): void {
    const [x, y] = foldWorkgroups(n, this.limits.maxComputeWorkgroupsPerDimension);
    this.dispatch({ ...spec, workgroups: [x, y] });
  }

  /** Submits everything recorded so far. Returns immediately. */
  flush(): void {
    this.endPass();
    if (!this.encoder) return;
    const cmd = this.encoder.finish();
    this.encoder = null;
    this.pendingDispatches = 0;
    this.device.queue.submit([cmd]);
    // Uniform buffers can be reused now: any later write is queue-ordered after this submit.
    for (const b of this.transient.splice(0)) this.pool.release(b);
  }

  /** Submits and waits until the GPU has finished all work; throws on WebGPU errors. */
  async sync(): Promise<void> {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.checkErrors();
  }

  destroy(): void {
    this.pool.destroy();
    this.device.destroy();
  }

  private enc(): GPUCommandEncoder {
    if (!this.encoder) this.encoder = this.device.createCommandEncoder({ label: 'batch' });
    return this.encoder;
  }

  private computePass(): GPUComputePassEncoder {
    if (!this.pass) this.pass = this.enc().beginComputePass({ label: 'ops' });
    return this.pass;
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
  }
}

/** Splits n workgroups into (x, y) with x, y <= maxDim; x*y >= n (kernels bounds-check). */
export function foldWorkgroups(n: number, maxDim: number): [number, number] {
  if (n <= maxDim) return [n, 1];
  const y = Math.ceil(n / maxDim);
  if (y > maxDim) throw new VtError('too-large', `${n} workgroups cannot be folded into ${maxDim}x${maxDim}`);
  return [Math.ceil(n / y), y];
}
