// steadySplit: a shard-local job keeps its split while the measured speeds only jitter, and
// takes the fresh one when the ring changes or a member's share moves by more than the tolerance.
import { describe, expect, it } from 'vitest';
import { steadySplit } from '../../coordinator/step-plan.ts';

describe('steadySplit', () => {
  const ring = ['a', 'b', 'c', 'd'];
  const prev = { ring, images: [16, 16, 16, 16] };

  it('keeps the previous split while every share moves by at most a tenth (at least one image)', () => {
    expect(steadySplit(prev, ring, [17, 15, 16, 16])).toEqual([16, 16, 16, 16]);
    expect(steadySplit(prev, ring, [18, 14, 17, 15])).toEqual([16, 16, 16, 16]); // 2 <= round(1.6)
  });

  it('takes the fresh split when a share moves more, the ring changes or the batch differs', () => {
    expect(steadySplit(prev, ring, [20, 12, 16, 16])).toEqual([20, 12, 16, 16]);
    expect(steadySplit(prev, ['a', 'b', 'd', 'c'], [17, 15, 16, 16])).toEqual([17, 15, 16, 16]);
    expect(steadySplit(prev, ['a', 'b', 'c'], [22, 21, 21])).toEqual([22, 21, 21]);
    expect(steadySplit(prev, ring, [17, 16, 16, 16])).toEqual([17, 16, 16, 16]); // 65 images: another batch
    expect(steadySplit(null, ring, [17, 15, 16, 16])).toEqual([17, 15, 16, 16]);
  });

  it('never returns a split of another total than the fresh one', () => {
    for (let t = 0; t < 200; t++) {
      const fresh = ring.map((_, i) => 10 + ((t * 7 + i * 3) % 5));
      const out = steadySplit({ ring, images: [12, 12, 12, 12] }, ring, fresh);
      const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
      expect(sum(out)).toBe(sum(fresh));
    }
  });
});
