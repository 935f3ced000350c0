// The wasm engine: WebAssembly SIMD kernels (wasm/*.ts, AssemblyScript) on the CPU behind the
// Engine interface. Tensors are (shape, dtype, byte offset) in one WebAssembly.Memory that the
// engine owns (src/wasm/heap.ts); ops run at once, in the calling thread, so flush() is a
// no-op and read() only copies. Op semantics, shapes and checks are those of src/ops (the op
// drivers are src/wasm/ops-linalg.ts and ops-layers.ts). Works in Node, pages and workers.
import type { DType, Engine, EngineInfo, HostArray } from '../backend/engine.ts';
import { check, VtError } from '../errors.ts';
import { shapeStr, sizeOf } from '../gpu/tensor.ts';
import type { BatchNormBackwardParams, BatchNormParams } from '../ops/batchnorm.ts';
import type { BiasBackwardParams } from '../ops/bias.ts';
import type { Conv2dBackwardOptions, Conv2dParams } from '../ops/conv2d.ts';
import type { DropoutParams } from '../ops/dropout.ts';
import type { GemmParams } from '../ops/gemm.ts';
import type { LrnParams } from '../ops/lrn.ts';
import type { Pool2dParams } from '../ops/pool.ts';
import type { SoftmaxXentParams } from '../ops/softmax_xent.ts';
import type { TopkParams } from '../ops/topk.ts';
import { Heap } from './heap.ts';
import { isNode, type Kernels, loadKernels } from './kernels.ts';
import * as L from './ops-layers.ts';
import * as G from './ops-linalg.ts';
import type { ScratchSlot, WasmBlock, WasmCtx, WasmTensor } from './tensor.ts';

export type { WasmTensor } from './tensor.ts';

export interface WasmEngineOptions {
  /** Worker threads for the kernels. Only 1 exists so far; larger values run on 1. */
  threads?: number;
  /** Initial memory in MiB (it grows on demand); default 64. */
  initialMiB?: number;
}

let nextOwner = 1;

const dtypeOf = (data: HostArray): DType => (data instanceof Float32Array ? 'f32' : data instanceof Int32Array ? 'i32' : 'u32');

export class WasmEngine implements Engine<WasmTensor> {
  readonly info: EngineInfo;
  readonly viewAlign = 4;
  private readonly owner = nextOwner++;
  private readonly scratchBlocks = new Map<ScratchSlot, { ptr: number; bytes: number }>();
  private destroyed = false;
  private readonly cx: WasmCtx;

  private constructor(private readonly heap: Heap, private readonly k: Kernels) {
    this.info = { backend: 'wasm', platform: isNode() ? 'node' : 'browser', description: 'WebAssembly SIMD, 1 thread', cpu: true };
    this.cx = { k, ptr: (t, what) => this.ptr(t, what), scratch: (slot, bytes) => this.scratch(slot, bytes) };
  }

  /** Loads (in Node: builds first if needed) the kernels and makes an engine with its own memory. */
  static async create(opts: WasmEngineOptions = {}): Promise<WasmEngine> {
    const threads = opts.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1) throw new VtError('bad-shape', `WasmEngine: threads must be an integer >= 1, got ${threads}`);
    const heap = new Heap(Math.ceil(((opts.initialMiB ?? 64) * 2 ** 20) / 65536));
    const k = await loadKernels(heap.memory);
    heap.setBase(k.heapBase());
    return new WasmEngine(heap, k);
  }

  /** Allocator and memory figures (tests, diagnostics). */
  memoryStats(): ReturnType<Heap['stats']> {
    return this.heap.stats();
  }

  // ---- tensors ---------------------------------------------------------------------------

  empty(shape: readonly number[], dtype: DType = 'f32', label = 'tensor'): WasmTensor {
    this.alive('empty');
    const size = sizeOf(shape);
    const bytes = Math.max(4, size * 4);
    const ptr = this.heap.alloc(bytes, `${label} ${shapeStr(shape)}`);
    const block: WasmBlock = { ptr, bytes, label, owner: this.owner, live: true };
    return { shape: [...shape], size, dtype, byteOffset: ptr, block, isView: false };
  }

  zeros(shape: readonly number[], dtype: DType = 'f32', label = 'zeros'): WasmTensor {
    const t = this.empty(shape, dtype, label);
    this.heap.u8.fill(0, t.byteOffset, t.byteOffset + t.size * 4);
    return t;
  }

  upload(data: HostArray, shape: readonly number[] = [data.length], label = 'upload'): WasmTensor {
    check(sizeOf(shape) === data.length, 'upload', () => `${data.length} values do not fill shape ${shapeStr(shape)}`);
    const t = this.empty(shape, dtypeOf(data), label);
    this.write(t, data);
    return t;
  }

  write(t: WasmTensor, data: HostArray, elemOffset = 0): void {
    const p = this.ptr(t, 'write');
    check(Number.isInteger(elemOffset) && elemOffset >= 0 && elemOffset + data.length <= t.size, 'write', () => `${data.length} values at ${elemOffset} overflow a tensor of ${t.size}`);
    this.heap.u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), p + elemOffset * 4);
  }

  view(t: WasmTensor, start: number, shape: readonly number[]): WasmTensor {
    const p = this.ptr(t, 'view');
    const size = sizeOf(shape);
    check(Number.isInteger(start) && start >= 0 && start + size <= t.size, 'view', () => `[${start}, ${start + size}) is outside a tensor of ${t.size} elements`);
    return { shape: [...shape], size, dtype: t.dtype, byteOffset: p + start * 4, block: t.block, isView: true };
  }

  copy(src: WasmTensor, dst: WasmTensor): void {
    check(src.size === dst.size, 'copy', () => `${src.size} elements into ${dst.size}`);
    const s = this.ptr(src, 'copy'), d = this.ptr(dst, 'copy');
    this.heap.u8.copyWithin(d, s, s + src.size * 4);
  }

  /** Frees tensors from empty/zeros/upload. Releasing a view, or twice, is an error. */
  release(...ts: (WasmTensor | null | undefined)[]): void {
    for (const t of ts) {
      if (!t) continue;
      this.ptr(t, 'release');
      check(!t.isView, 'release', () => `${shapeStr(t.shape)} is a view of '${t.block.label}': release the tensor it views`);
      t.block.live = false;
      this.heap.release(t.block.ptr);
    }
  }

  async read(t: WasmTensor): Promise<HostArray> {
    const p = this.ptr(t, 'read');
    const bytes = this.heap.u8.slice(p, p + t.size * 4).buffer;
    return t.dtype === 'f32' ? new Float32Array(bytes) : t.dtype === 'i32' ? new Int32Array(bytes) : new Uint32Array(bytes);
  }

  async readF32(t: WasmTensor): Promise<Float32Array> {
    const r = await this.read(t);
    if (!(r instanceof Float32Array)) throw new VtError('bad-shape', `readF32 on a ${t.dtype} tensor`);
    return r;
  }

  flush(): void {
    this.alive('flush');
  }

  /** Drops the memory; every tensor of this engine becomes unusable. */
  destroy(): void {
    this.destroyed = true;
    this.scratchBlocks.clear();
  }

  // ---- ops (src/wasm/ops-*.ts) -----------------------------------------------------------

  gemm(a: WasmTensor, b: WasmTensor, c: WasmTensor, p?: GemmParams): void { G.gemm(this.cx, a, b, c, p); }
  conv2dForward(x: WasmTensor, w: WasmTensor, y: WasmTensor, p: Conv2dParams): void { G.conv2dForward(this.cx, x, w, y, p); }
  conv2dBackwardInput(dy: WasmTensor, w: WasmTensor, dx: WasmTensor, p: Conv2dParams, o?: Conv2dBackwardOptions): void { G.conv2dBackwardInput(this.cx, dy, w, dx, p, o); }
  conv2dBackwardFilter(x: WasmTensor, dy: WasmTensor, dw: WasmTensor, p: Conv2dParams, o?: Conv2dBackwardOptions): void { G.conv2dBackwardFilter(this.cx, x, dy, dw, p, o); }
  biasAddInPlace(x: WasmTensor, b: WasmTensor): void { L.biasAddInPlace(this.cx, x, b); }
  biasBackward(dy: WasmTensor, db: WasmTensor, p: BiasBackwardParams): void { L.biasBackward(this.cx, dy, db, p); }
  reluForward(x: WasmTensor, y: WasmTensor): void { L.reluForward(this.cx, x, y); }
  reluBackward(x: WasmTensor, dy: WasmTensor, dx: WasmTensor): void { L.reluBackward(this.cx, x, dy, dx); }
  add(x: WasmTensor, y: WasmTensor, z: WasmTensor): void { L.add(this.cx, x, y, z); }
  addInPlace(x: WasmTensor, y: WasmTensor): void { L.addInPlace(this.cx, x, y); }
  fill(x: WasmTensor, value: number): void { L.fill(this.cx, x, value); }
  maxPoolForward(x: WasmTensor, y: WasmTensor, argmax: WasmTensor, p: Pool2dParams): void { L.maxPoolForward(this.cx, x, y, argmax, p); }
  maxPoolBackward(dy: WasmTensor, argmax: WasmTensor, dx: WasmTensor, p: Pool2dParams): void { L.maxPoolBackward(this.cx, dy, argmax, dx, p); }
  avgPoolForward(x: WasmTensor, y: WasmTensor, p: Pool2dParams): void { L.avgPoolForward(this.cx, x, y, p); }
  avgPoolBackward(dy: WasmTensor, dx: WasmTensor, p: Pool2dParams): void { L.avgPoolBackward(this.cx, dy, dx, p); }
  globalAvgPoolForward(x: WasmTensor, y: WasmTensor): void { L.globalAvgPoolForward(this.cx, x, y); }
  globalAvgPoolBackward(dy: WasmTensor, dx: WasmTensor): void { L.globalAvgPoolBackward(this.cx, dy, dx); }
  batchNormForward(x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, rm: WasmTensor, rv: WasmTensor, y: WasmTensor, mean: WasmTensor, invstd: WasmTensor, p: BatchNormParams): void {
    L.batchNormForward(this.cx, x, gamma, beta, rm, rv, y, mean, invstd, p);
  }
  batchNormInference(x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, rm: WasmTensor, rv: WasmTensor, y: WasmTensor, p: { eps: number }): void {
    L.batchNormInference(this.cx, x, gamma, beta, rm, rv, y, p);
  }
  batchNormBackward(x: WasmTensor, dy: WasmTensor, gamma: WasmTensor, mean: WasmTensor, invstd: WasmTensor, dx: WasmTensor, dgamma: WasmTensor, dbeta: WasmTensor, p: BatchNormBackwardParams): void {
    L.batchNormBackward(this.cx, x, dy, gamma, mean, invstd, dx, dgamma, dbeta, p);
  }
  lrnForward(x: WasmTensor, y: WasmTensor, p: LrnParams): void { L.lrnForward(this.cx, x, y, p); }
  lrnBackward(x: WasmTensor, y: WasmTensor, dy: WasmTensor, dx: WasmTensor, p: LrnParams): void { L.lrnBackward(this.cx, x, y, dy, dx, p); }
  dropoutForward(x: WasmTensor, y: WasmTensor, p: DropoutParams): void { L.dropoutForward(this.cx, x, y, p); }
  dropoutBackward(dy: WasmTensor, dx: WasmTensor, p: DropoutParams): void { L.dropoutBackward(this.cx, dy, dx, p); }
  softmaxXent(logits: WasmTensor, labels: WasmTensor, dlogits: WasmTensor, losses: WasmTensor, total: WasmTensor, p: SoftmaxXentParams): void {
    L.softmaxXent(this.cx, logits, labels, dlogits, losses, total, p);
  }
  topkCount(logits: WasmTensor, labels: WasmTensor, counts: WasmTensor, p?: TopkParams): void { L.topkCount(this.cx, logits, labels, counts, p); }

  // ---- internals -------------------------------------------------------------------------

  private alive(what: string): void {
    if (this.destroyed) throw new VtError('bad-shape', `${what}: this WasmEngine was destroyed; create a new one`);
  }

  private ptr(t: WasmTensor, what: string): number {
    this.alive(what);
    const b = t.block;
    if (b === undefined || b.owner !== this.owner) throw new VtError('bad-shape', `${what}: tensor ${shapeStr(t.shape)} does not belong to this WasmEngine`);
    if (!b.live) throw new VtError('bad-shape', `${what}: tensor '${b.label}' ${shapeStr(t.shape)} was released`);
    return t.byteOffset;
  }

  private scratch(slot: ScratchSlot, bytes: number): number {
    const s = this.scratchBlocks.get(slot);
    if (s && s.bytes >= bytes) return s.ptr;
    if (s) this.heap.release(s.ptr);
    // Some headroom, so slowly growing requests do not reallocate every time.
    const size = Math.max(bytes, s ? Math.ceil(s.bytes * 1.5) : 0);
    const ptr = this.heap.alloc(size, `scratch '${slot}'`);
    this.scratchBlocks.set(slot, { ptr, bytes: size });
    return ptr;
  }
}
