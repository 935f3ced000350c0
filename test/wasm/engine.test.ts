// The wasm engine's memory side: the first-fit allocator (coalescing, reuse), tensors and views,
// memory growth (data kept, views re-created), read/write copies, release/reuse, and the
// errors for bad use (released, foreign or out-of-range tensors, views released).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VtError } from '../../src/errors.ts';
import { FreeList } from '../../src/wasm/heap.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';

describe('FreeList (first fit, coalescing)', () => {
  it('allocates first fit, reuses and coalesces released blocks', () => {
    const f = new FreeList();
    f.addRange(0, 1024);
    const a = f.alloc(64)!, b = f.alloc(128)!, c = f.alloc(64)!;
    expect([a, b, c]).toEqual([0, 64, 192]);
    expect(f.release(b)).toBe(true);
    expect(f.alloc(64)).toBe(64); // first fit: the hole left by b
    expect(f.stats().freeRanges).toBe(2); // [128, 192) and the tail
    f.release(64);
    f.release(a);
    f.release(c);
    expect(f.stats()).toEqual({ freeBytes: 1024, freeRanges: 1, usedBytes: 0, usedBlocks: 0 });
    expect(f.alloc(2048)).toBeNull();
    expect(f.release(12345)).toBe(false);
  });

  it('merges a new range with the free tail (growth)', () => {
    const f = new FreeList();
    f.addRange(0, 256);
    f.alloc(128);
    f.addRange(256, 256);
    expect(f.endingAt(512)).toEqual([128, 384]);
    expect(f.alloc(384)).toBe(128);
  });
});

describe('WasmEngine tensors', () => {
  let e: WasmEngine;
  beforeAll(async () => {
    e = await WasmEngine.create({ initialMiB: 1 });
  });
  afterAll(() => e?.destroy());

  it('describes itself', () => {
    // Node 20 has relaxed SIMD behind a V8 flag, which the loader sets (src/wasm/kernels.ts relaxedSimd).
    expect(e.fma).toBe(true);
    expect(e.info).toEqual({ backend: 'wasm', platform: 'node', description: 'WebAssembly SIMD with FMA, 1 thread', cpu: true });
    expect(e.viewAlign).toBe(4);
  });

  it('runs the plain kernels when told (fma: off) and refuses an unknown fma setting', async () => {
    const plain = await WasmEngine.create({ initialMiB: 1, fma: 'off' });
    expect([plain.fma, plain.info.description]).toEqual([false, 'WebAssembly SIMD, 1 thread']);
    plain.destroy();
    await expect(WasmEngine.create({ fma: 'on' as 'auto' })).rejects.toThrow(/fma must be 'auto' or 'off', got on/);
  });

  it('uploads, writes at offsets, reads copies of every dtype', async () => {
    const f = e.upload(new Float32Array([1, 2, 3, 4, 5]), [5]);
    e.write(f, new Float32Array([9, 8]), 3);
    const r = await e.readF32(f);
    expect(Array.from(r)).toEqual([1, 2, 3, 9, 8]);
    r[0] = 100; // a copy: the tensor is unchanged
    expect((await e.readF32(f))[0]).toBe(1);
    const i = e.upload(new Int32Array([-1, 2]));
    const u = e.upload(new Uint32Array([0xffffffff]));
    expect(await e.read(i)).toEqual(new Int32Array([-1, 2]));
    expect(await e.read(u)).toEqual(new Uint32Array([0xffffffff]));
    expect(i.dtype).toBe('i32');
    await expect(e.readF32(i)).rejects.toThrow(/readF32 on a i32 tensor/);
    await expect(e.readF32Into(i, new Float32Array(2), 0)).rejects.toThrow(/readF32Into on a i32 tensor/);
    await expect(e.readF32Into(f, new Float32Array(6), 2)).rejects.toThrow(/5 floats at 2 do not fit an array of 6/);
    const into = new Float32Array(7);
    await e.readF32Into(f, into, 1);
    expect(Array.from(into)).toEqual([0, 1, 2, 3, 9, 8, 0]);
    const z = e.zeros([2, 3]);
    expect(Array.from(await e.readF32(z))).toEqual([0, 0, 0, 0, 0, 0]);
    e.release(f, i, u, z);
  });

  it('views are relative to their tensor and share its storage', async () => {
    const t = e.upload(Float32Array.from({ length: 12 }, (_, i) => i), [12]);
    const v = e.view(t, 4, [2, 3]);
    const vv = e.view(v, 2, [2]);
    expect(Array.from(await e.readF32(v))).toEqual([4, 5, 6, 7, 8, 9]);
    expect(Array.from(await e.readF32(vv))).toEqual([6, 7]);
    e.write(vv, new Float32Array([-1, -2]));
    expect(Array.from(await e.readF32(t)).slice(5, 9)).toEqual([5, -1, -2, 8]);
    e.fill(v, 3);
    expect(Array.from(await e.readF32(t))).toEqual([0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 10, 11]);
    const d = e.empty([6]);
    e.copy(v, d);
    expect(Array.from(await e.readF32(d))).toEqual([3, 3, 3, 3, 3, 3]);
    e.release(t, d);
  });

  it('grows the memory and keeps data (views re-created)', async () => {
    const before = e.memoryStats().memoryBytes;
    const small = e.upload(new Float32Array([1.5, 2.5]));
    const big = e.zeros([3 * 2 ** 20]); // 12 MiB against 1 MiB of initial memory
    expect(e.memoryStats().memoryBytes).toBeGreaterThan(before);
    e.write(big, new Float32Array([7]), 3 * 2 ** 20 - 1);
    expect(Array.from(await e.readF32(small))).toEqual([1.5, 2.5]);
    expect((await e.readF32(big))[3 * 2 ** 20 - 1]).toBe(7);
    e.release(small, big);
  });

  it('reuses released memory (no growth in a loop of allocate/release)', () => {
    const t0 = e.empty([1000]);
    e.release(t0);
    const stats = e.memoryStats();
    for (let i = 0; i < 200; i++) {
      const a = e.empty([1000 + i]), b = e.empty([77]);
      e.release(a, b);
    }
    const t1 = e.empty([1000]);
    expect(t1.byteOffset).toBe(t0.byteOffset);
    e.release(t1);
    expect(e.memoryStats()).toEqual(stats);
  });

  it('tensors start on 64-byte boundaries', () => {
    const ts = [e.empty([1]), e.empty([3]), e.empty([17])];
    for (const t of ts) expect(t.byteOffset % 64).toBe(0);
    e.release(...ts);
  });

  it('rejects bad use with clear VtErrors', async () => {
    const t = e.empty([4]);
    const v = e.view(t, 0, [2]);
    expect(() => e.view(t, 3, [2])).toThrow(/\[3, 5\) is outside a tensor of 4 elements/);
    expect(() => e.write(t, new Float32Array(5))).toThrow(/overflow a tensor of 4/);
    expect(() => e.upload(new Float32Array(3), [2, 2])).toThrow(/3 values do not fill shape \[2, 2\]/);
    expect(() => e.copy(t, v)).toThrow(/4 elements into 2/);
    expect(() => e.empty([2, -1])).toThrow(VtError);
    expect(() => e.release(v)).toThrow(/is a view of 'tensor': release the tensor it views/);
    e.release(t);
    expect(() => e.release(t)).toThrow(/was released/);
    await expect(e.read(v)).rejects.toThrow(/was released/);
    expect(() => e.reluForward(t, t)).toThrow(/relu.forward: tensor 'tensor' \[4\] was released/);
    const other = await WasmEngine.create({ initialMiB: 1 });
    const o = other.empty([4]);
    expect(() => e.fill(o, 1)).toThrow(/does not belong to this WasmEngine/);
    other.destroy();
    expect(() => other.empty([1])).toThrow(/destroyed/);
  });
});
