import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/conv2d.ts';
import { conv2dShape, type Conv2dParams } from '../../src/shapes/conv2d.ts';
import { gradCheck } from '../helpers/gradcheck.ts';
import { makeRng } from '../../src/rng.ts';

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

// Small shapes covering stride, padding, odd and asymmetric sizes, 1x1 and stride > kernel.
const cases: [string, number[], number[], Conv2dParams][] = [
  ['3x3 p1 on 5x4', [2, 3, 5, 4], [2, 3, 3, 3], { stride: 1, pad: 1 }],
  ['3x3 s2 p1 on 7x6', [1, 2, 7, 6], [3, 2, 3, 3], { stride: 2, pad: 1 }],
  ['1x1 s2', [2, 3, 5, 5], [2, 3, 1, 1], { stride: 2, pad: 0 }],
  ['5x3 kernel, stride [2, 1], pad [2, 0]', [1, 2, 6, 5], [2, 2, 5, 3], { stride: [2, 1], pad: [2, 0] }],
  ['2x2 s3 (input pixels no tap touches)', [1, 2, 7, 8], [2, 2, 2, 2], { stride: 3, pad: 0 }],
  ['11x11 s4 p2', [1, 1, 15, 15], [2, 1, 11, 11], { stride: 4, pad: 2 }],
];

describe('conv2d reference', () => {
  for (const [name, xs, ws, p] of cases) {
    it(`${name}: backward input and filter match central differences`, () => {
      const rng = makeRng(prod(xs) + prod(ws));
      const x = Float64Array.from({ length: prod(xs) }, () => rng.next() * 2 - 1);
      const w = Float64Array.from({ length: prod(ws) }, () => rng.next() * 2 - 1);
      const errors = gradCheck({
        inputs: [x, w],
        forward: ([a, b]) => ref.conv2dForward(a!, xs, b!, ws, p),
        backward: ([a, b], dy) => [ref.conv2dBackwardInput(dy, b!, xs, ws, p), ref.conv2dBackwardFilter(a!, dy, xs, ws, p)],
      });
      expect(errors).toEqual([]);
    });
  }

  it('forward matches a hand-computed example (padding counts as zero, stride skips)', () => {
    // x = 1..9 in a 3x3 image, w = all ones 2x2, pad 1, stride 2: output 2x2 sums of the
    // window corners that fall inside the image.
    const x = Float64Array.from({ length: 9 }, (_, i) => i + 1);
    const p = { stride: 2, pad: 1 };
    expect(conv2dShape([1, 1, 3, 3], [1, 1, 2, 2], p)).toEqual([1, 1, 2, 2]);
    expect(Array.from(ref.conv2dForward(x, [1, 1, 3, 3], new Float64Array(4).fill(1), [1, 1, 2, 2], p))).toEqual([1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9]);
  });

  it('gradCheck notices a backward that is off by one tap', () => {
    const xs = [1, 1, 4, 4], ws = [1, 1, 3, 3], p = { stride: 1, pad: 1 };
    const x = Float64Array.from({ length: 16 }, (_, i) => Math.sin(i));
    const w = Float64Array.from({ length: 9 }, (_, i) => Math.cos(i));
    const shifted = (dy: Float64Array) => ref.conv2dBackwardInput(dy, Float64Array.from(w).reverse(), xs, ws, p);
    expect(gradCheck({ inputs: [x], forward: ([a]) => ref.conv2dForward(a!, xs, w, ws, p), backward: (_, dy) => [shifted(dy)] }).length).toBe(1);
  });
});
