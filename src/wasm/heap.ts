// The wasm engine's memory: one WebAssembly.Memory shared by the kernels and every tensor,
// with a first-fit allocator (free blocks kept sorted by address and coalesced on release)
// above the module's static data. The memory grows when nothing fits; growth detaches the old
// ArrayBuffer, so typed-array views are re-created then (read them through `f32`, `u8`, ...
// each time, never keep one across an allocation).
import { VtError } from '../errors.ts';

/** Every block starts on a 64-byte boundary (a cache line; four v128). */
export const BLOCK_ALIGN = 64;
const PAGE = 65536;
/** wasm32's limit: 65,536 pages of 64 KiB. */
const MAX_PAGES = 65536;

const roundUp = (n: number, m: number): number => Math.ceil(n / m) * m;

/** First-fit allocation over address ranges (no memory of its own: pure bookkeeping). */
export class FreeList {
  /** Free [start, size] ranges, sorted by start, never adjacent (always coalesced). */
  private readonly ranges: [number, number][] = [];
  private readonly used = new Map<number, number>();
  private usedBytes = 0;
  /** The most usedBytes has been since resetPeak(). */
  peakBytes = 0;

  /** Adds [start, start + size) to the free space (e.g. after the memory grew). */
  addRange(start: number, size: number): void {
    this.insert(start, size);
  }

  /** Start of a block of `size` bytes (a multiple of BLOCK_ALIGN), or null when none fits. */
  alloc(size: number): number | null {
    for (let i = 0; i < this.ranges.length; i++) {
      const r = this.ranges[i]!;
      if (r[1] < size) continue;
      const start = r[0];
      if (r[1] === size) this.ranges.splice(i, 1);
      else { r[0] += size; r[1] -= size; }
      this.used.set(start, size);
      this.usedBytes += size;
      this.peakBytes = Math.max(this.peakBytes, this.usedBytes);
      return start;
    }
    return null;
  }

  /** Returns the block that alloc() returned at `start`; false when there is none. */
  release(start: number): boolean {
    const size = this.used.get(start);
    if (size === undefined) return false;
    this.used.delete(start);
    this.usedBytes -= size;
    this.insert(start, size);
    return true;
  }

  /** The free range that ends at `end`, if any (the top of memory, before growing). */
  endingAt(end: number): [number, number] | undefined {
    const last = this.ranges[this.ranges.length - 1];
    return last && last[0] + last[1] === end ? last : undefined;
  }

  resetPeak(): void {
    this.peakBytes = this.usedBytes;
  }

  stats(): { freeBytes: number; freeRanges: number; usedBytes: number; usedBlocks: number } {
    let freeBytes = 0, usedBytes = 0;
    for (const [, s] of this.ranges) freeBytes += s;
    for (const s of this.used.values()) usedBytes += s;
    return { freeBytes, freeRanges: this.ranges.length, usedBytes, usedBlocks: this.used.size };
  }

  private insert(start: number, size: number): void {
    // Binary search for the first range after start.
    let lo = 0, hi = this.ranges.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.ranges[mid]![0] < start) lo = mid + 1;
      else hi = mid;
    }
    const prev = this.ranges[lo - 1], next = this.ranges[lo];
    if (prev && prev[0] + prev[1] > start) throw new Error(`FreeList: [${start}, +${size}) overlaps free [${prev[0]}, +${prev[1]})`);
    if (next && start + size > next[0]) throw new Error(`FreeList: [${start}, +${size}) overlaps free [${next[0]}, +${next[1]})`);
    if (prev && prev[0] + prev[1] === start) {
      prev[1] += size;
      if (next && prev[0] + prev[1] === next[0]) {
        prev[1] += next[1];
        this.ranges.splice(lo, 1);
      }
    } else if (next && start + size === next[0]) {
      next[0] = start;
      next[1] += size;
    } else {
      this.ranges.splice(lo, 0, [start, size]);
    }
  }
}

/** The engine's memory and allocator. Owns the WebAssembly.Memory. */
export class Heap {
  readonly memory: WebAssembly.Memory;
  private readonly maxPages: number;
  private readonly free = new FreeList();
  private buf!: ArrayBufferLike;
  private views!: { f32: Float32Array; i32: Int32Array; u32: Uint32Array; u8: Uint8Array };

  /**
   * `initialPages` of memory; allocation starts at `base` (the module's __heap_base). With
   * `sharedMaxPages` the memory is shared (threads), growable up to that many pages.
   */
  constructor(initialPages: number, base?: number, sharedMaxPages?: number) {
    this.memory = sharedMaxPages === undefined
      ? new WebAssembly.Memory({ initial: initialPages })
      : new WebAssembly.Memory({ initial: initialPages, maximum: sharedMaxPages, shared: true });
    this.maxPages = sharedMaxPages ?? MAX_PAGES;
    if (base !== undefined) this.setBase(base);
  }

  /** Hands everything above `base` to the allocator (once, after the module is known). */
  setBase(base: number): void {
    const start = roundUp(Math.max(base, BLOCK_ALIGN), BLOCK_ALIGN);
    this.free.addRange(start, this.memory.buffer.byteLength - start);
    this.refresh();
  }

  get f32(): Float32Array { return this.current().f32; }
  get i32(): Int32Array { return this.current().i32; }
  get u32(): Uint32Array { return this.current().u32; }
  get u8(): Uint8Array { return this.current().u8; }
  get byteLength(): number { return this.memory.buffer.byteLength; }

  /** A block of at least `bytes` bytes (64-byte aligned); grows the memory when needed. */
  alloc(bytes: number, what = 'tensor'): number {
    const size = roundUp(Math.max(bytes, 1), BLOCK_ALIGN);
    const p = this.free.alloc(size);
    if (p !== null) return p;
    this.grow(size, what);
    const q = this.free.alloc(size);
    if (q === null) throw new Error(`Heap: no block of ${size} bytes after growing (allocator bug)`);
    return q;
  }

  release(ptr: number): boolean {
    return this.free.release(ptr);
  }

  stats(): ReturnType<FreeList['stats']> & { memoryBytes: number; peakBytes: number; maxBytes: number } {
    return { ...this.free.stats(), memoryBytes: this.byteLength, peakBytes: this.free.peakBytes, maxBytes: this.maxPages * PAGE };
  }

  resetPeak(): void {
    this.free.resetPeak();
  }

  /** Grows so a block of `size` fits at the top; at least by half the current size (fewer, larger steps). */
  private grow(size: number, what: string): void {
    const end = this.byteLength;
    const tail = this.free.endingAt(end);
    const missing = size - (tail ? tail[1] : 0);
    const pages = Math.max(Math.ceil(missing / PAGE), Math.ceil(end / PAGE / 2));
    const have = end / PAGE;
    const add = Math.min(pages, this.maxPages - have);
    if (add * PAGE < missing) {
      throw new VtError('too-large', `${what}: ${size} bytes do not fit the ${this.maxPages / 16384} GiB of WebAssembly memory `
        + `(${end} bytes in use or free): use a smaller batch or model.`);
    }
    try {
      this.memory.grow(add);
    } catch (e) {
      throw new VtError('too-large', `${what}: the WebAssembly memory could not grow to ${(end + add * PAGE) / 2 ** 20} MiB `
        + `(${e instanceof Error ? e.message : String(e)}): use a smaller batch or close other tabs.`);
    }
    this.free.addRange(end, add * PAGE);
    this.refresh();
  }

  private current(): Heap['views'] {
    if (this.memory.buffer !== this.buf) this.refresh();
    return this.views;
  }

  private refresh(): void {
    const b = this.memory.buffer;
    this.buf = b;
    this.views = { f32: new Float32Array(b), i32: new Int32Array(b), u32: new Uint32Array(b), u8: new Uint8Array(b) };
  }
}
