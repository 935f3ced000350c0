// Buffer pool: GPU buffers reused by (usage, size class). Free buffers are kept up to a byte
// budget and the least recently freed are destroyed past it, so the pool never grows without
// bound. Size classes are quarter steps between powers of two (at most 25% waste).

export function sizeClass(bytes: number): number {
  const b = Math.max(256, Math.ceil(bytes));
  const p = 2 ** Math.floor(Math.log2(b));
  if (p === b) return b;
  const step = p / 4;
  return Math.ceil(b / step) * step;
}

export class BufferPool {
  private readonly free = new Map<string, GPUBuffer[]>();
  /** Free buffers in the order they were released (oldest first), for eviction. */
  private readonly order: { key: string; buf: GPUBuffer }[] = [];
  private freeBytes = 0;
  private liveCount = 0;
  /** Bytes of the buffers handed out and not released, and the most they have been since resetPeak(). */
  private liveBytes = 0;
  private peakBytes = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly maxFreeBytes = 256 * 1024 * 1024,
  ) {}

  acquire(bytes: number, usage: GPUBufferUsageFlags, label: string): GPUBuffer {
    const size = sizeClass(bytes);
    const key = `${usage}:${size}`;
    const list = this.free.get(key);
    const buf = list?.pop();
    if (buf) {
      const i = this.order.findIndex((e) => e.buf === buf);
      if (i >= 0) this.order.splice(i, 1);
      this.freeBytes -= size;
      buf.label = label;
      this.taken(size);
      return buf;
    }
    this.taken(size);
    return this.device.createBuffer({ size, usage, label });
  }

  private taken(size: number): void {
    this.liveCount++;
    this.liveBytes += size;
    this.peakBytes = Math.max(this.peakBytes, this.liveBytes);
  }

  /** Returns a buffer for reuse. Safe right after queue.submit(): later uses are queue-ordered. */
  release(buf: GPUBuffer): void {
    const key = `${buf.usage}:${buf.size}`;
    let list = this.free.get(key);
    if (!list) this.free.set(key, (list = []));
    list.push(buf);
    this.order.push({ key, buf });
    this.freeBytes += buf.size;
    this.liveCount--;
    this.liveBytes -= buf.size;
    while (this.freeBytes > this.maxFreeBytes && this.order.length > 0) {
      const old = this.order.shift()!;
      const l = this.free.get(old.key)!;
      l.splice(l.indexOf(old.buf), 1);
      this.freeBytes -= old.buf.size;
      old.buf.destroy();
    }
  }

  stats(): { freeBytes: number; freeBuffers: number; live: number; liveBytes: number; peakBytes: number } {
    return { freeBytes: this.freeBytes, freeBuffers: this.order.length, live: this.liveCount, liveBytes: this.liveBytes, peakBytes: this.peakBytes };
  }

  resetPeak(): void {
    this.peakBytes = this.liveBytes;
  }

  destroy(): void {
    for (const e of this.order) e.buf.destroy();
    this.order.length = 0;
    this.free.clear();
    this.freeBytes = 0;
  }
}
