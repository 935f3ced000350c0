import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/dropout.ts';
import { makeRng } from '../../src/rng.ts';
import { gradCheck } from '../helpers/gradcheck.ts';

describe('dropout reference', () => {
  it('backward matches central differences (p = 0.3)', () => {
    const rng = makeRng(3);
    const x = Float64Array.from({ length: 64 }, () => 2 * rng.next() - 1);
    const params = { p: 0.3, seed: 77 };
    expect(gradCheck({ inputs: [x], forward: ([a]) => ref.dropoutForward(a!, params), backward: (_, dy) => [ref.dropoutBackward(dy, params)] })).toEqual([]);
  });
  it('the hash is pinned: peers on other machines and versions must draw the same masks', () => {
    // If this fails, the mask changed: every peer must update together.
    const got = [[0, 0], [1, 0], [0, 1], [12345, 678], [0xffffffff, 0xffffffff]].map(([s, i]) => ref.dropoutBits(s!, i!));
    expect(got).toEqual([632013150, 1242376808, 1092597679, 2522241434, 970145434]);
  });
  it('p = 0 keeps everything unscaled', () => {
    const x = Float64Array.from([1, -2, 3]);
    expect(Array.from(ref.dropoutForward(x, { p: 0, seed: 5 }))).toEqual([1, -2, 3]);
  });
  it('keeps about 1 - p, and different seeds give different masks', () => {
    const n = 1 << 16;
    for (const p of [0.1, 0.5, 0.9]) {
      const kept = ref.dropoutMask(n, { p, seed: 1 }).reduce((a, b) => a + b, 0) / n;
      // Binomial standard deviation sqrt(p(1-p)/n) <= 0.002: allow 5 of them.
      expect(Math.abs(kept - (1 - p))).toBeLessThan(0.01);
    }
    const a = ref.dropoutMask(n, { p: 0.5, seed: 1 }), b = ref.dropoutMask(n, { p: 0.5, seed: 2 });
    const same = a.reduce((s, v, i) => s + (v === b[i] ? 1 : 0), 0) / n;
    expect(Math.abs(same - 0.5)).toBeLessThan(0.01);
  });
  it('rejects p = 1 and non-u32 seeds', () => {
    expect(() => ref.dropoutMask(4, { p: 1, seed: 0 })).toThrow(/p must be in \[0, 1\)/);
    expect(() => ref.dropoutMask(4, { p: 0.5, seed: -1 })).toThrow(/seed must be a u32/);
  });
});
