import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/eltwise.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

const rand = (seed: number, n: number): Float64Array => {
  const rng = makeRng(seed);
  return Float64Array.from({ length: n }, () => 2 * rng.next() - 1);
};

describe('eltwise reference', () => {
  const x = rand(1, 13), y = rand(2, 13), a = -0.75;
  it('add backward matches central differences', () => {
    expect(gradCheck({ inputs: [x, y], forward: ([p, q]) => ref.add(p!, q!), backward: (_, d) => ref.addBackward(d) })).toEqual([]);
  });
  it('scale backward matches central differences', () => {
    expect(gradCheck({ inputs: [x], forward: ([p]) => ref.scale(p!, a), backward: (_, d) => [ref.scaleBackward(d, a)] })).toEqual([]);
  });
  it('axpy backward matches central differences', () => {
    expect(gradCheck({ inputs: [x, y], forward: ([p, q]) => ref.axpy(a, p!, q!), backward: (_, d) => ref.axpyBackward(d, a) })).toEqual([]);
  });
  it('fill makes a constant', () => {
    expect(Array.from(ref.fill(3, 2.5))).toEqual([2.5, 2.5, 2.5]);
  });
});
