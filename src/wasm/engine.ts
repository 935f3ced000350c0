// The wasm engine: WebAssembly SIMD kernels (wasm/*.ts, AssemblyScript) on the CPU behind the
// Engine interface. Tensors are (shape, dtype, byte offset) in one WebAssembly.Memory that the
// engine owns (src/wasm/heap.ts); ops run at once on one thread, and read() only copies. Op
// semantics, shapes and checks are those of src/ops (the op drivers are
// src/wasm/ops-linalg.ts and ops-layers.ts). Works in Node, pages and workers.
// With threads > 1 the memory is shared and threads-1 workers (src/wasm/threads.ts) run parts
// of GEMM, conv2d, pooling, relu and add next to the calling thread, with results bitwise
// identical to 1 thread; the other ops stay on the calling thread. Ops of one part per thread are
// queued and run as one job of the pool (barriers between them) at the next host access, flush(),
// op of fewer parts or scratch that moves (`batch`, the default): one wake-up of the threads for
// many ops. That needs
// SharedArrayBuffer (in a page: cross-origin isolation) and a thread that may block (Node, or a
// Web Worker; not a page's main thread).
import type { DType, Engine, EngineInfo, EngineMemory, HostArray } from '../backend/engine.ts';
import { check, VtError } from '../errors.ts';
import { shapeStr, sizeOf } from '../shapes/shape.ts';
import type { BatchNormBackwardParams, BatchNormParams } from '../shapes/batchnorm.ts';
import type { BiasBackwardParams } from '../shapes/bias.ts';
import type { Conv2dBackwardOptions, Conv2dParams } from '../shapes/conv2d.ts';
import type { DropoutParams } from '../shapes/dropout.ts';
import type { GemmParams } from '../shapes/gemm.ts';
import type { LrnParams } from '../shapes/lrn.ts';
import type { Pool2dParams } from '../shapes/pool.ts';
import type { SoftmaxXentParams } from '../shapes/softmax_xent.ts';
import type { TopkParams } from '../shapes/topk.ts';
import { Heap } from './heap.ts';
import { compileKernels, isNode, KERNEL_NAMES, type Kernels, kernelVariant, loadKernels, relaxedSimd } from './kernels.ts';
import * as L from './ops-layers.ts';
import * as G from './ops-linalg.ts';
import {
  WINOGRAD_MODES, type PartCtx, type PointwiseMode, type ScratchSlot, type WasmBlock, type WasmCtx, type WasmTensor, type WinogradMode,
} from './tensor.ts';
import { CommandList, ThreadPool, threadsUnavailable } from './threads.ts';

export type { WasmTensor } from './tensor.ts';

export interface WasmEngineOptions {
  /**
   * Threads for the heavy ops, the calling one included (1 to MAX_THREADS). Default: 1 in
   * Node; in a browser navigator.hardwareConcurrency (at most 4) where the page is cross-origin
   * isolated and this thread may block, else 1.
   */
  threads?: number;
  /** Initial memory in MiB (it grows on demand); default 64. */
  initialMiB?: number;
  /**
   * 3x3 stride-1 convolutions by Winograd: 'auto' (default) where it is faster, by F(4x4, 3x3) in the forward and input
   * gradient on maps of 8x8 and more, else F(2x2, 3x3); 'f2' the same layers all by F(2x2, 3x3); 'always' / 'always4' F(2x2, 3x3) / F(4x4, 3x3)
   * wherever it applies (tests), 'off' keeps every convolution on im2col + GEMM (src/wasm/ops-winograd.ts).
   */
  winograd?: WinogradMode;
  /**
   * The GEMM kernels' multiply-adds: 'auto' (default) fused (relaxed SIMD's f32x4.relaxed_madd) where the runtime
   * has relaxed SIMD, 'off' a multiply then an add everywhere (wasm/gemm.ts madd).
   */
  fma?: FmaMode;
  /**
   * Threaded engines: queue the ops that have one part per thread and run them as one job of the pool (barriers
   * between them) at the next host access, instead of one job per op (default true; the same bits either way).
   * The ops bench turns it off, so that each op's time is its own.
   */
  batch?: boolean;
  /**
   * A 1x1 stride-1 convolution of several images a group (maps of a multiple of 8 pixels): 'segments' (default) runs
   * its forward and input gradient by gemmSeg on the images where they lie; 'copy' copies their columns side by side
   * and the result back, as before (the same bits, but for the sign of an input gradient of exactly zero, which the
   * copies turned +0; tests compare the two, benches time one against the other). The filter gradient copies either way.
   */
  pointwise?: PointwiseMode;
}

export type FmaMode = 'auto' | 'off';

/** Whether engines made with this setting run the fused (-fma) kernels: 'auto' where the runtime has relaxed SIMD. */
export async function fusedFor(mode: FmaMode): Promise<boolean> {
  if (!['auto', 'off'].includes(mode)) throw new VtError('bad-shape', `WasmEngine: fma must be 'auto' or 'off', got ${String(mode)}`);
  return mode === 'auto' && (await relaxedSimd());
}

let nextOwner = 1;

export const MAX_THREADS = 64;
/** The shared memory's maximum (pages): 4 GiB, or 1 GiB where that cannot be reserved. */
const SHARED_MAX_PAGES = [65536, 16384];

/** The default thread count here (see WasmEngineOptions.threads). */
export function defaultThreads(): number {
  if (isNode()) return 1;
  const g = globalThis as { crossOriginIsolated?: boolean; navigator?: { hardwareConcurrency?: number } };
  if (g.crossOriginIsolated !== true || threadsUnavailable() !== null) return 1;
  return Math.max(1, Math.min(4, Math.floor(g.navigator?.hardwareConcurrency ?? 1)));
}

function sharedHeap(pages: number): Heap {
  for (const max of SHARED_MAX_PAGES) {
    try {
      return new Heap(pages, undefined, max);
    } catch (e) {
      if (!(e instanceof RangeError) || max === SHARED_MAX_PAGES[SHARED_MAX_PAGES.length - 1]) throw e;
    }
  }
  throw new Error('unreachable');
}

/** Records kernel calls as commands for a thread (src/wasm/threads.ts); queries go to `live`. */
function recorder(live: Kernels, list: CommandList): Kernels {
  const rec: Record<string, unknown> = {
    heapBase: () => live.heapBase(), gemmScratchBytes: () => live.gemmScratchBytes(),
    wgInputScratchBytes: (th: number, tw: number) => live.wgInputScratchBytes(th, tw),
  };
  KERNEL_NAMES.forEach((name, i) => {
    if (!(name in rec)) rec[name] = (...args: number[]) => list.add(i, args);
  });
  return rec as unknown as Kernels; // every name of Kernels is set above
}

const dtypeOf = (data: HostArray): DType => (data instanceof Float32Array ? 'f32' : data instanceof Int32Array ? 'i32' : 'u32');

export class WasmEngine implements Engine<WasmTensor> {
  readonly info: EngineInfo;
  readonly viewAlign = 4;
  private readonly owner = nextOwner++;
  /** Scratch by key: '<slot>' for an op's shared buffers, '<part>:<slot>' for each part's own. */
  private readonly scratchBlocks = new Map<string, { ptr: number; bytes: number }>();
  /** Each part's command list and its recorder, kept from op to op (made on the first op with that many parts). */
  private readonly lists: { list: CommandList; k: Kernels }[] = [];
  /** Ops queued for the pool (see run): each thread's commands, and how many ops they hold. */
  private readonly queue: CommandList[] = [];
  private queued = 0;
  private destroyed = false;
  private readonly cx: WasmCtx;
  private readonly live: PartCtx;

  private constructor(
    private readonly heap: Heap, private readonly k: Kernels, private readonly pool: ThreadPool | null, winograd: WinogradMode, pointwise: PointwiseMode,
    /** Whether the GEMM kernels multiply-add fused (the -fma kernels: relaxed SIMD). */
    readonly fma: boolean,
    /** Whether ops are queued for the pool (WasmEngineOptions.batch). */
    readonly batch: boolean,
  ) {
    const threads = pool?.size ?? 1;
    const description = `WebAssembly SIMD${fma ? ' with FMA' : ''}, ${threads} thread${threads > 1 ? 's' : ''}`;
    this.info = { backend: 'wasm', platform: isNode() ? 'node' : 'browser', description, cpu: true };
    this.live = { k, scratch: (slot, bytes) => this.scratch(`0:${slot}`, bytes), barrier: () => {} };
    const drained = (): Kernels => {
      this.drain();
      return k;
    };
    this.cx = {
      get k() { return drained(); },
      sizes: k, threads, winograd, pointwise, ptr: (t, what) => this.ptr(t, what), scratch: (slot, bytes) => this.scratch(slot, bytes),
      run: (parts, part) => this.run(parts, part),
    };
  }

  /**
   * Loads (in Node: builds first if needed) the kernels and makes an engine with its own memory
   * (and threads). When the thread count was not given and the threads cannot start (e.g. the
   * browser refuses the workers), it falls back to 1 thread; an explicit count fails instead.
   */
  static async create(opts: WasmEngineOptions = {}): Promise<WasmEngine> {
    const threads = opts.threads ?? defaultThreads();
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS) {
      throw new VtError('bad-shape', `WasmEngine: threads must be an integer from 1 to ${MAX_THREADS}, got ${String(threads)}`);
    }
    if (threads > 1) {
      const why = threadsUnavailable();
      if (why) throw new VtError('bad-shape', `WasmEngine: ${threads} threads were asked for, but ${why}. Use threads: 1 here.`);
    }
    const pages = Math.ceil(((opts.initialMiB ?? 64) * 2 ** 20) / 65536);
    const winograd = opts.winograd ?? 'auto';
    if (!WINOGRAD_MODES.includes(winograd)) {
      throw new VtError('bad-shape', `WasmEngine: winograd must be ${WINOGRAD_MODES.map((m) => `'${m}'`).join(', ')}, got ${String(winograd)}`);
    }
    const fma = await fusedFor(opts.fma ?? 'auto');
    const batch = opts.batch ?? true;
    const pointwise = opts.pointwise ?? 'segments';
    if (pointwise !== 'segments' && pointwise !== 'copy') {
      throw new VtError('bad-shape', `WasmEngine: pointwise must be 'segments' or 'copy', got ${String(pointwise)}`);
    }
    const make = (n: number) => WasmEngine.make(n, pages, winograd, pointwise, fma, batch);
    if (threads === 1 || opts.threads !== undefined) return make(threads);
    try {
      return await make(threads);
    } catch (e) {
      console.warn(`WasmEngine: ${threads} threads could not start (${e instanceof Error ? e.message : String(e)}); running on 1 thread`);
      return make(1);
    }
  }

  private static async make(
    threads: number, pages: number, winograd: WinogradMode, pointwise: PointwiseMode, fma: boolean, batch: boolean,
  ): Promise<WasmEngine> {
    const heap = threads > 1 ? sharedHeap(pages) : new Heap(pages);
    const variant = kernelVariant(threads > 1, fma);
    const k = await loadKernels(heap.memory, variant);
    heap.setBase(k.heapBase());
    const pool = threads > 1 ? await ThreadPool.start(threads - 1, await compileKernels(variant), heap, k) : null;
    return new WasmEngine(heap, k, pool, winograd, pointwise, fma, batch);
  }

  /** Threads that run the kernels, the calling one included. */
  get threads(): number {
    return this.pool?.size ?? 1;
  }

  memory(): EngineMemory {
    const s = this.heap.stats();
    return { usedBytes: s.usedBytes, peakBytes: s.peakBytes, limitBytes: s.maxBytes, maxTensorBytes: s.maxBytes };
  }

  /** Gives back the kernels' scratch (ops grow it again as they need it), then starts the peak: a probe then sees its own scratch. */
  resetPeak(): void {
    this.alive('resetPeak');
    this.drain();
    for (const s of this.scratchBlocks.values()) this.heap.release(s.ptr);
    this.scratchBlocks.clear();
    this.heap.resetPeak();
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
    this.drain();
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
    check(Number.isInteger(elemOffset) && elemOffset >= 0 && elemOffset + data.length <= t.size, 'write',
      () => `${data.length} values at ${elemOffset} overflow a tensor of ${t.size}`);
    this.drain();
    this.heap.u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), p + elemOffset * 4);
  }

  view(t: WasmTensor, start: number, shape: readonly number[]): WasmTensor {
    const p = this.ptr(t, 'view');
    const size = sizeOf(shape);
    check(Number.isInteger(start) && start >= 0 && start + size <= t.size, 'view',
      () => `[${start}, ${start + size}) is outside a tensor of ${t.size} elements`);
    return { shape: [...shape], size, dtype: t.dtype, byteOffset: p + start * 4, block: t.block, isView: true };
  }

  copy(src: WasmTensor, dst: WasmTensor): void { L.copy(this.cx, src, dst); }

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
    this.drain();
    const bytes = this.heap.u8.slice(p, p + t.size * 4).buffer;
    return t.dtype === 'f32' ? new Float32Array(bytes) : t.dtype === 'i32' ? new Int32Array(bytes) : new Uint32Array(bytes);
  }

  async readF32(t: WasmTensor): Promise<Float32Array> {
    const r = await this.read(t);
    if (!(r instanceof Float32Array)) throw new VtError('bad-shape', `readF32 on a ${t.dtype} tensor`);
    return r;
  }

  async readF32Into(t: WasmTensor, dst: Float32Array, offset: number): Promise<void> {
    const p = this.ptr(t, 'readF32Into');
    if (t.dtype !== 'f32') throw new VtError('bad-shape', `readF32Into on a ${t.dtype} tensor`);
    if (!Number.isInteger(offset) || offset < 0 || offset + t.size > dst.length) {
      throw new VtError('bad-shape', `readF32Into: ${t.size} floats at ${offset} do not fit an array of ${dst.length}`);
    }
    this.drain();
    dst.set(this.heap.f32.subarray(p / 4, p / 4 + t.size), offset);
  }

  /** Runs the ops queued for the threads (reads and writes do so themselves; copy and fill are queued ops). */
  flush(): void {
    this.alive('flush');
    this.drain();
  }

  /** Drops the memory and ends the threads; every tensor of this engine becomes unusable. */
  destroy(): void {
    this.destroyed = true;
    this.queued = 0;
    this.scratchBlocks.clear();
    this.pool?.destroy();
  }

  // ---- ops (src/wasm/ops-*.ts) -----------------------------------------------------------

  gemm(a: WasmTensor, b: WasmTensor, c: WasmTensor, p?: GemmParams): void { G.gemm(this.cx, a, b, c, p); }
  conv2dForward(x: WasmTensor, w: WasmTensor, y: WasmTensor, p: Conv2dParams): void { G.conv2dForward(this.cx, x, w, y, p); }
  conv2dBackwardInput(dy: WasmTensor, w: WasmTensor, dx: WasmTensor, p: Conv2dParams, o?: Conv2dBackwardOptions): void {
    G.conv2dBackwardInput(this.cx, dy, w, dx, p, o);
  }
  conv2dBackwardFilter(x: WasmTensor, dy: WasmTensor, dw: WasmTensor, p: Conv2dParams, o?: Conv2dBackwardOptions): void {
    G.conv2dBackwardFilter(this.cx, x, dy, dw, p, o);
  }
  biasAddInPlace(x: WasmTensor, b: WasmTensor): void { L.biasAddInPlace(this.cx, x, b); }
  biasBackward(dy: WasmTensor, db: WasmTensor, p: BiasBackwardParams): void { L.biasBackward(this.cx, dy, db, p); }
  reluForward(x: WasmTensor, y: WasmTensor): void { L.reluForward(this.cx, x, y); }
  reluBackward(x: WasmTensor, dy: WasmTensor, dx: WasmTensor): void { L.reluBackward(this.cx, x, dy, dx); }
  biasRelu(x: WasmTensor, b: WasmTensor, y: WasmTensor): void { L.biasRelu(this.cx, x, b, y); }
  reluBiasBackward(y: WasmTensor, dy: WasmTensor, dx: WasmTensor, db: WasmTensor, p: BiasBackwardParams): void {
    L.reluBiasBackward(this.cx, y, dy, dx, db, p);
  }
  add(x: WasmTensor, y: WasmTensor, z: WasmTensor): void { L.add(this.cx, x, y, z); }
  addInPlace(x: WasmTensor, y: WasmTensor): void { L.addInPlace(this.cx, x, y); }
  fill(x: WasmTensor, value: number): void { L.fill(this.cx, x, value); }
  maxPoolForward(x: WasmTensor, y: WasmTensor, argmax: WasmTensor, p: Pool2dParams): void { L.maxPoolForward(this.cx, x, y, argmax, p); }
  maxPoolBackward(dy: WasmTensor, argmax: WasmTensor, dx: WasmTensor, p: Pool2dParams): void { L.maxPoolBackward(this.cx, dy, argmax, dx, p); }
  poolReluBiasBackward(dy: WasmTensor, argmax: WasmTensor, y: WasmTensor, dx: WasmTensor, db: WasmTensor, p: Pool2dParams & BiasBackwardParams): void {
    L.poolReluBiasBackward(this.cx, dy, argmax, y, dx, db, p);
  }
  avgPoolForward(x: WasmTensor, y: WasmTensor, p: Pool2dParams): void { L.avgPoolForward(this.cx, x, y, p); }
  avgPoolBackward(dy: WasmTensor, dx: WasmTensor, p: Pool2dParams): void { L.avgPoolBackward(this.cx, dy, dx, p); }
  globalAvgPoolForward(x: WasmTensor, y: WasmTensor): void { L.globalAvgPoolForward(this.cx, x, y); }
  globalAvgPoolBackward(dy: WasmTensor, dx: WasmTensor): void { L.globalAvgPoolBackward(this.cx, dy, dx); }
  batchNormForward(
    x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, rm: WasmTensor, rv: WasmTensor, y: WasmTensor, mean: WasmTensor, invstd: WasmTensor,
    p: BatchNormParams,
  ): void {
    L.batchNormForward(this.cx, x, gamma, beta, rm, rv, y, mean, invstd, p);
  }
  batchNormInference(x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, rm: WasmTensor, rv: WasmTensor, y: WasmTensor, p: { eps: number }): void {
    L.batchNormInference(this.cx, x, gamma, beta, rm, rv, y, p);
  }
  batchNormBackward(
    x: WasmTensor, dy: WasmTensor, gamma: WasmTensor, mean: WasmTensor, invstd: WasmTensor, dx: WasmTensor, dgamma: WasmTensor, dbeta: WasmTensor,
    p: BatchNormBackwardParams,
  ): void {
    L.batchNormBackward(this.cx, x, dy, gamma, mean, invstd, dx, dgamma, dbeta, p);
  }
  batchNormReluForward(
    x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, rm: WasmTensor, rv: WasmTensor, y: WasmTensor, mean: WasmTensor, invstd: WasmTensor,
    p: BatchNormParams,
  ): void {
    L.batchNormForward(this.cx, x, gamma, beta, rm, rv, y, mean, invstd, p, true);
  }
  batchNormReluInference(x: WasmTensor, gamma: WasmTensor, beta: WasmTensor, rm: WasmTensor, rv: WasmTensor, y: WasmTensor, p: { eps: number }): void {
    L.batchNormInference(this.cx, x, gamma, beta, rm, rv, y, p, true);
  }
  batchNormReluBackward(
    x: WasmTensor, dy: WasmTensor, gamma: WasmTensor, beta: WasmTensor, mean: WasmTensor, invstd: WasmTensor, dx: WasmTensor, dgamma: WasmTensor,
    dbeta: WasmTensor, p: BatchNormBackwardParams,
  ): void {
    L.batchNormBackward(this.cx, x, dy, gamma, mean, invstd, dx, dgamma, dbeta, p, beta);
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

  /** Runs an op's parts: here when there is one, else recorded and handed to the pool. */
  private run(parts: number, part: (pcx: PartCtx, t: number) => void): void {
    this.alive('run');
    if (parts <= 1 || !this.pool) {
      this.drain();
      part(this.live, 0);
      return;
    }
    for (let t = this.lists.length; t < parts; t++) {
      const list = new CommandList();
      this.lists.push({ list, k: recorder(this.k, list) });
    }
    const lists: Float64Array[] = [];
    for (let t = 0; t < parts; t++) {
      const { list, k } = this.lists[t]!;
      list.reset();
      part({ k, scratch: (slot, bytes) => this.scratch(`${t}:${slot}`, bytes), barrier: () => list.barrier() }, t);
      lists.push(list.commands);
    }
    // An op of fewer parts than threads keeps barriers of its own parts: it runs alone, after the queue.
    if (!this.batch || parts !== this.pool.size) {
      this.drain();
      this.pool.run(lists);
      return;
    }
    for (let t = 0; t < parts; t++) {
      const q = (this.queue[t] ??= new CommandList());
      if (this.queued > 0) q.barrier(); // the ops before are done on every thread
      q.append(lists[t]!);
    }
    this.queued++;
  }

  /** Runs the queued ops as one job of the pool. */
  private drain(): void {
    if (this.queued === 0 || !this.pool) return;
    this.queued = 0;
    try {
      this.pool.run(this.queue.map((q) => q.commands));
    } finally {
      for (const q of this.queue) q.reset();
    }
  }

  private scratch(key: ScratchSlot | `${number}:${ScratchSlot}`, bytes: number): number {
    const s = this.scratchBlocks.get(key);
    if (s && s.bytes >= bytes) return s.ptr;
    this.drain(); // queued ops may use the block that moves
    if (s) this.heap.release(s.ptr);
    // Some headroom, so slowly growing requests do not reallocate every time.
    const size = Math.max(bytes, s ? Math.ceil(s.bytes * 1.5) : 0);
    const ptr = this.heap.alloc(size, `scratch '${key}'`);
    this.scratchBlocks.set(key, { ptr, bytes: size });
    return ptr;
  }
}
