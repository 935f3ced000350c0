// Tensors of the wasm engine: (shape, dtype, byte offset) inside the engine's one
// WebAssembly.Memory. A block is one allocation; views share their root's block.
import type { TensorLike } from '../backend/engine.ts';
import type { Kernels } from './kernels.ts';

export interface WasmBlock {
  /** Byte address of the allocation. */
  readonly ptr: number;
  readonly bytes: number;
  readonly label: string;
  /** Owner id: an engine only accepts its own tensors. */
  readonly owner: number;
  /** False after release() (or the engine's destroy()). */
  live: boolean;
}

export interface WasmTensor extends TensorLike {
  /** Byte address of element 0 in the engine's memory. */
  readonly byteOffset: number;
  readonly block: WasmBlock;
  /** True for tensors from view(): they are freed with the tensor they view. */
  readonly isView: boolean;
}

/** Scratch kept by the engine between ops: packing buffers, im2col columns, op temporaries. */
export type ScratchSlot = 'gemm' | 'col' | 'aux' | 'col2' | 'aux2' | 'wgU' | 'wgV' | 'wgM' | 'wgP';

/** What one part of a split op may do (src/wasm/threads.ts runs the parts on the threads). */
export interface PartCtx {
  /** The kernels: real calls in a one-part op, recorded calls in a split one. */
  readonly k: Kernels;
  /** This part's own scratch for `slot` (no other part uses it during the op). */
  scratch(slot: ScratchSlot, bytes: number): number;
  /** Waits until every part of the op got here (a no-op in a one-part op). */
  barrier(): void;
}

/**
 * When 3x3 stride-1 convolutions run by Winograd (src/wasm/ops-winograd.ts winogradTile): 'auto' where it wins here,
 * by F(4x4, 3x3) in the forward and input gradient on maps of 8x8 and more and by F(2x2, 3x3) otherwise (docs/wasm.md);
 * 'f2' the same layers all by F(2x2, 3x3) (the default until 2026-12-01: the benches' peer); 'always' / 'always4'
 * F(2x2, 3x3) / F(4x4, 3x3) wherever they apply (tests); 'off' never.
 */
export type WinogradMode = 'auto' | 'f2' | 'always' | 'always4' | 'off';

/** 'segments': gemmSeg reads and writes the images where they lie; 'copy': their columns copied side by side and back (as before). */
export type PointwiseMode = 'segments' | 'copy';
export const WINOGRAD_MODES: readonly WinogradMode[] = ['auto', 'f2', 'always', 'always4', 'off'];

/** What the op drivers (src/wasm/ops-*.ts) need from the engine. */
export interface WasmCtx {
  /** The kernels, called here and now: the engine first runs the ops it queued (see run). */
  readonly k: Kernels;
  /** The same kernels for size queries only (gemmScratchBytes, wgInputScratchBytes, wg4ScratchBytes): nothing queued runs. */
  readonly sizes: Kernels;
  /** Byte address of t's element 0; throws unless t is a live tensor of this engine. */
  ptr(t: WasmTensor, what: string): number;
  /** A block of at least `bytes` bytes for `slot`, reused by later calls (contents undefined). */
  scratch(slot: ScratchSlot, bytes: number): number;
  /** Threads the engine has (1: none besides the calling one). */
  readonly threads: number;
  /** When 3x3 stride-1 convolutions run by Winograd (src/wasm/ops-winograd.ts). */
  readonly winograd: WinogradMode;
  /** How a group of images' 1x1 convolution meets its GEMM (WasmEngineOptions.pointwise). */
  readonly pointwise: PointwiseMode;
  /**
   * Runs part(pcx, t) for t in [0, parts) (parts <= threads), each on its own thread with its
   * own scratch; returns when all are done. Parts must write disjoint outputs. Scratch from
   * cx.scratch() (the calling thread's) may be handed to every part as shared input/output.
   * A threaded engine that batches (the default) queues an op of one part per thread behind the
   * ops before it, a barrier between them, and runs the queue as one job of the pool at the next
   * host access (read, write, zeros, flush), op of fewer parts, call through k, or scratch
   * that must move: the threads then wake once for many ops (docs/wasm.md).
   */
  run(parts: number, part: (pcx: PartCtx, t: number) => void): void;
}
