// The checker itself must fail when a backward is wrong (tinygrad's habit).
import { describe, expect, it } from 'vitest';
import { gradCheck } from '../helpers/gradcheck.ts';
import { compareArrays } from '../helpers/compare.ts';

describe('gradCheck', () => {
  const x = Float64Array.from([0.3, -1.2, 2.5, 0.7]);
  const forward = ([a]: Float64Array[]) => a!.map((v) => v * v * v);
  it('accepts a correct backward', () => {
    expect(gradCheck({ inputs: [x], forward, backward: ([a], dy) => [a!.map((v, i) => 3 * v * v * dy[i]!)] })).toEqual([]);
  });
  it('rejects a wrong backward', () => {
    expect(gradCheck({ inputs: [x], forward, backward: ([a], dy) => [a!.map((v, i) => 2.9 * v * v * dy[i]!)] }).length).toBe(1);
  });
});

describe('compareArrays', () => {
  it('treats NaN and Inf explicitly', () => {
    expect(compareArrays([NaN], [0], { rtol: 1, atol: 1 }).ok).toBe(false);
    expect(compareArrays([NaN], [NaN], { rtol: 0, atol: 0 }).ok).toBe(true);
    expect(compareArrays([Infinity], [1e30], { rtol: 1, atol: 1 }).ok).toBe(false);
    expect(compareArrays([1, 2.001], [1, 2], { rtol: 1e-5, atol: 0 }).worstIndex).toBe(1);
  });
});
