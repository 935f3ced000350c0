import { describe, expect, it } from 'vitest';
import * as ref from '../../src/ref/relu.ts';
import { gradCheck } from '../helpers/gradcheck.ts';
import { makeRng } from '../../src/rng.ts';

describe('relu reference', () => {
  it('backward matches central differences', () => {
    const rng = makeRng(1);
    // Keep inputs away from the kink at 0 where the derivative is undefined.
    const x = Float64Array.from({ length: 50 }, () => (rng.next() < 0.5 ? -1 : 1) * (0.1 + rng.next()));
    expect(gradCheck({ inputs: [x], forward: ([a]) => ref.reluForward(a!), backward: ([a], dy) => [ref.reluBackward(a!, dy)] })).toEqual([]);
  });
});
