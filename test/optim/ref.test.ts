// The float64 reference checked by hand on tiny layouts, and the per-layout table.
import { describe, expect, it } from 'vitest';
import { layoutOf } from '../../src/nn/layout.ts';
import { resnet50 } from '../../src/nn/models.ts';
import { OptimError } from '../../src/optim/errors.ts';
import { SPLIT_UNIT } from '../../src/shapes/reduce.ts';
import { buildUpdateTable, FLAG_ADAPT, FLAG_DECAY, ROW_U32, UPDATE_CHUNK } from '../../src/optim/table.ts';
import type { ParamSegment } from '../../src/optim/types.ts';
import { larsStep, sgdStep, trustRatio } from '../../src/ref/optim.ts';

const seg = (offset: number, length: number, adapt = true, decay = true, name = `s${offset}`): ParamSegment => ({ name, offset, length, adapt, decay });

describe('trustRatio (the safe-value rule)', () => {
  it('is eta ||w|| / (||g|| + beta ||w||) when adapted and both norms are positive', () => {
    expect(trustRatio(3, 0.5, 0.001, 0.01, true)).toBeCloseTo((0.001 * 3) / (0.5 + 0.03), 15);
  });
  it('is 1 when ||w|| = 0, ||g|| = 0, or the segment is not adapted', () => {
    expect(trustRatio(0, 0.5, 0.001, 0.01, true)).toBe(1);
    expect(trustRatio(3, 0, 0.001, 0.01, true)).toBe(1);
    expect(trustRatio(0, 0, 0.001, 0, true)).toBe(1);
    expect(trustRatio(3, 0.5, 0.001, 0.01, false)).toBe(1);
  });
});

describe('larsStep (float64 reference)', () => {
  it('matches a hand computation over two steps', () => {
    // One adapted, decayed segment w = (3, 4): ||w|| = 5. G = (0.6, 0.8) * 2, gradScale 0.5 -> g = (0.6, 0.8), ||g|| = 1.
    const w = Float64Array.from([3, 4]), v = new Float64Array(2), G = Float64Array.from([1.2, 1.6]);
    const k = { lr: 2, momentum: 0.9, weightDecay: 0.1, gradScale: 0.5 };
    larsStep(w, v, G, [seg(0, 2)], k, 0.01);
    const lambda = (0.01 * 5) / (1 + 0.1 * 5);
    const v1 = [2 * lambda * (0.6 + 0.3), 2 * lambda * (0.8 + 0.4)];
    expect([...v]).toEqual(v1.map((x) => expect.closeTo(x, 14)));
    expect([...w]).toEqual([3 - v1[0]!, 4 - v1[1]!].map((x) => expect.closeTo(x, 14)));
    const w1 = [...w];
    const wn = Math.hypot(w1[0]!, w1[1]!);
    const lambda2 = (0.01 * wn) / (1 + 0.1 * wn);
    larsStep(w, v, G, [seg(0, 2)], k, 0.01);
    const v2 = [0.9 * v1[0]! + 2 * lambda2 * (0.6 + 0.1 * w1[0]!), 0.9 * v1[1]! + 2 * lambda2 * (0.8 + 0.1 * w1[1]!)];
    expect([...v]).toEqual(v2.map((x) => expect.closeTo(x, 14)));
    expect([...w]).toEqual([w1[0]! - v2[0]!, w1[1]! - v2[1]!].map((x) => expect.closeTo(x, 14)));
  });

  it('uses lambda = 1 for zero weights and for non-adapted segments, beta = 0 without decay', () => {
    const w = Float64Array.from([0, 0, 9, 2, 7]), v = new Float64Array(5), G = Float64Array.from([1, 2, 5, 3, 4]);
    larsStep(w, v, G, [seg(0, 2), seg(3, 1, false, true), seg(4, 1, true, false)], { lr: 0.5, momentum: 0.9, weightDecay: 0.1, gradScale: 1 }, 0.01);
    expect([...v]).toEqual([0.5, 1, 0, expect.closeTo(0.5 * (3 + 0.2), 15), expect.closeTo(0.5 * ((0.01 * 7) / 4) * 4, 15)]);
    expect(w[2]).toBe(9); // outside every segment: untouched
  });
});

describe('sgdStep (float64 reference)', () => {
  it('is plain gradient descent with weight decay when momentum is 0', () => {
    const w = Float64Array.from([1, -2]), v = new Float64Array(2);
    sgdStep(w, v, Float64Array.from([4, 8]), [seg(0, 2)], { lr: 0.1, momentum: 0, weightDecay: 0.5, gradScale: 0.25 }, false);
    expect([...w]).toEqual([expect.closeTo(1 - 0.1 * (1 + 0.5), 15), expect.closeTo(-2 - 0.1 * (2 - 1), 15)]);
  });
  it('Nesterov steps by m v_new + lr d', () => {
    const w = Float64Array.from([1]), v = Float64Array.from([0.2]);
    sgdStep(w, v, Float64Array.from([3]), [seg(0, 1, true, false)], { lr: 0.1, momentum: 0.5, weightDecay: 0.5, gradScale: 1 }, true);
    expect(v[0]).toBeCloseTo(0.5 * 0.2 + 0.3, 15);
    expect(w[0]).toBeCloseTo(1 - (0.5 * 0.4 + 0.3), 15);
  });
});

const ONE = { maxElems: 2 ** 30, align: 64 }; // everything fits one binding

describe('buildUpdateTable', () => {
  it('lays out offset, length, flags, first chunk and segment per piece; empty segments get none', () => {
    const t = buildUpdateTable([seg(0, 1), seg(64, 0), seg(64, UPDATE_CHUNK + 1, false, true), seg(2048, 3, true, false)], 2100, ONE);
    expect([...t.rows]).toEqual([0, 1, FLAG_ADAPT | FLAG_DECAY, 0, 0, 64, UPDATE_CHUNK + 1, FLAG_DECAY, 1, 2, 2048, 3, FLAG_ADAPT, 3, 3]);
    expect(t.windows).toEqual([{ base: 0, size: 2051, firstRow: 0, rows: 3, chunks: 4 }]);
    expect(t.norms).toEqual([[0, 1], [64, 0], [64, UPDATE_CHUNK + 1], [2048, 3]]);
  });

  it('groups segments into aligned windows that fit the binding and splits larger segments on norm chunks', () => {
    const segs = [seg(0, 100), seg(128, 5000), seg(5184, 3), seg(5248, 20_000), seg(25_280, 64), seg(25_344, 1)];
    const limits = { maxElems: 8192, align: 64 };
    const t = buildUpdateTable(segs, 25_345, limits);
    const covered = segs.map(() => [] as [number, number][]);
    t.windows.forEach((w) => {
      expect(w.base % limits.align).toBe(0);
      expect(w.size).toBeLessThanOrEqual(limits.maxElems);
      for (let r = w.firstRow; r < w.firstRow + w.rows; r++) {
        const [off, len, , , s] = t.rows.subarray(r * ROW_U32, (r + 1) * ROW_U32);
        expect(off! + len!).toBeLessThanOrEqual(w.size);
        covered[s!]!.push([w.base + off!, len!]);
      }
    });
    // Each segment is covered exactly, in order; pieces of a split segment are whole chunks.
    segs.forEach((sg, i) => {
      const pieces = covered[i]!;
      expect(pieces[0]![0]).toBe(sg.offset);
      expect(pieces.reduce((a, [, len]) => a + len, 0)).toBe(sg.length);
      pieces.forEach(([off, len], k) => {
        if (k > 0) expect(off).toBe(pieces[k - 1]![0] + pieces[k - 1]![1]);
        if (k < pieces.length - 1) expect(len % SPLIT_UNIT).toBe(0);
      });
    });
    expect(covered[3]!.length).toBeGreaterThan(2); // 20000 floats in windows of 8192
    expect(t.windows.length).toBe(4); // [s0 s1 s2], then three for s3, the last shared with s4 and s5
  });

  it('rejects overlapping, out-of-range and malformed segments', () => {
    const kind = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        return e instanceof OptimError ? e.kind : String(e);
      }
      return 'none';
    };
    expect(kind(() => buildUpdateTable([seg(0, 10), seg(5, 10)], 100, ONE))).toBe('bad-layout');
    expect(kind(() => buildUpdateTable([seg(90, 11)], 100, ONE))).toBe('bad-layout');
    expect(kind(() => buildUpdateTable([seg(-1, 1)], 100, ONE))).toBe('bad-layout');
    expect(kind(() => buildUpdateTable([seg(0, 1.5)], 100, ONE))).toBe('bad-layout');
    expect(kind(() => buildUpdateTable([], 0, ONE))).toBe('bad-layout');
    expect(kind(() => buildUpdateTable([seg(0, 10), seg(10, 10)], 100, ONE))).toBe('none');
  });
});

describe('the model layout feeds the optimiser as it is', () => {
  it("resnet50's 161 tensors make a valid table; BN and fc bias are not adapted or decayed by default", async () => {
    const layout = layoutOf(resnet50());
    const segments: readonly ParamSegment[] = layout.params;
    const t = buildUpdateTable(segments, layout.paramFloats, ONE);
    expect(t.windows.map((w) => w.chunks)).toEqual([layout.params.reduce((a, p) => a + Math.ceil(p.length / UPDATE_CHUNK), 0)]);
    layout.params.forEach((p, i) => expect(t.rows[i * ROW_U32 + 2]).toBe(p.role === 'weight' ? FLAG_ADAPT | FLAG_DECAY : 0));
  });
});
