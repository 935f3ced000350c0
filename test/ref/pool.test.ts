import { describe, expect, it } from 'vitest';
import { pool2dShape, type Pool2dParams } from '../../src/shapes/pool.ts';
import * as ref from '../../src/ref/pool.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

// Distinct values 0.01 apart in random order: a finite-difference step never changes a max.
function distinct(seed: number, n: number): Float64Array {
  const rng = makeRng(seed);
  const v = Float64Array.from({ length: n }, (_, i) => (i - n / 2) * 0.01);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [v[i], v[j]] = [v[j]!, v[i]!];
  }
  return v;
}

const cases: [string, number[], Pool2dParams][] = [
  ['3x3 s2 overlapping (AlexNet)', [2, 2, 7, 7], { kernel: 3, stride: 2, pad: 0 }],
  ['3x3 s2 p1 (ResNet)', [1, 3, 6, 5], { kernel: 3, stride: 2, pad: 1 }],
  ['2x3 s(1,2) p(1,0)', [1, 2, 4, 7], { kernel: [2, 3], stride: [1, 2], pad: [1, 0] }],
];

describe('pool reference', () => {
  for (const [name, shape, params] of cases) {
    const n = shape.reduce((a, b) => a * b, 1);
    it(`max ${name}: backward matches central differences`, () => {
      const x = distinct(n, n);
      const { argmax } = ref.maxPoolForward(x, shape, params);
      expect(gradCheck({
        inputs: [x],
        forward: ([a]) => ref.maxPoolForward(a!, shape, params).y,
        backward: (_, dy) => [ref.maxPoolBackward(dy, argmax, shape, params)],
      })).toEqual([]);
    });
    it(`avg ${name}: backward matches central differences`, () => {
      expect(gradCheck({
        inputs: [distinct(n + 1, n)],
        forward: ([a]) => ref.avgPoolForward(a!, shape, params),
        backward: (_, dy) => [ref.avgPoolBackward(dy, shape, params)],
      })).toEqual([]);
    });
  }
  it('global average: backward matches central differences', () => {
    const shape = [2, 3, 3, 4];
    expect(gradCheck({
      inputs: [distinct(7, 72)],
      forward: ([a]) => ref.globalAvgPoolForward(a!, shape),
      backward: (_, dy) => [ref.globalAvgPoolBackward(dy, shape)],
    })).toEqual([]);
  });
  it('max ties go to the first max in row-major window order; padding never wins', () => {
    // 3x3 plane of -1 except two 5s; 2x2 windows, stride 1, pad 1 -> 4x4 outputs.
    const x = Float64Array.from([-1, 5, -1, 5, -1, -1, -1, -1, -1]);
    const { y, argmax } = ref.maxPoolForward(x, [1, 1, 3, 3], { kernel: 2, stride: 1, pad: 1 });
    expect(Array.from(y)).toEqual([-1, 5, 5, -1, 5, 5, 5, -1, 5, 5, -1, -1, -1, -1, -1, -1]);
    // Window (1,1) covers x[0..1, 0..1] = [-1, 5; 5, -1]: the 5 at index 1 comes first.
    expect(argmax[5]).toBe(1);
    expect(argmax[0]).toBe(0); // only x[0] is inside the image
  });
  it('average excludes padding from the count (count_include_pad = false)', () => {
    const x = Float64Array.from([1, 2, 3, 4]);
    // 2x2 plane, 3x3 windows, stride 1, pad 1: every window covers the whole plane.
    expect(Array.from(ref.avgPoolForward(x, [1, 1, 2, 2], { kernel: 3, stride: 1, pad: 1 }))).toEqual([2.5, 2.5, 2.5, 2.5]);
  });
  it('shape function: floor mode, and clear errors for impossible params', () => {
    expect(pool2dShape([2, 96, 55, 55], { kernel: 3, stride: 2, pad: 0 })).toEqual([2, 96, 27, 27]);
    expect(pool2dShape([1, 64, 112, 112], { kernel: 3, stride: 2, pad: 1 })).toEqual([1, 64, 56, 56]);
    expect(() => pool2dShape([1, 1, 4, 4], { kernel: 2, stride: 1, pad: 2 })).toThrow(/pad must be integers in \[0, kernel\)/);
    expect(() => pool2dShape([1, 1, 2, 2], { kernel: 5, stride: 1, pad: 1 })).toThrow(/larger than the padded input/);
    expect(() => pool2dShape([4, 4], { kernel: 2, stride: 2, pad: 0 })).toThrow(/x must be \[N, C, H, W\]/);
  });
});
