// The attack kinds of the tests and the trust bench (src/trust/adversary.ts): each does what its
// name says to a volunteer's gradient or data, and only that.
import { describe, expect, it } from 'vitest';
import { ADVERSARY_KINDS, adversaryOf } from '../../src/trust/adversary.ts';

const bucket = (v: number[]) => Float32Array.from(v);

describe('adversaries', () => {
  it('gradient kinds change each bucket as it leaves; data kinds leave it alone', () => {
    const sent = (kind: (typeof ADVERSARY_KINDS)[number]) => {
      const p = bucket([1, -2, 3]);
      adversaryOf(kind).tamper?.apply(p, 0);
      return [...p];
    };
    expect(sent('sign-flip')).toEqual([-1, 2, -3]);
    expect(sent('lie')).toEqual([-1, 2, -3]);
    expect(adversaryOf('lie').tamper!.consistent).toBe(false);
    expect(sent('scale')).toEqual([50, -100, 150]);
    expect(sent('zeros')).toEqual([0, 0, 0]);
    const noise = sent('noise');
    expect(noise).not.toEqual([1, -2, 3]);
    for (const kind of ['half', 'other-images', 'flip-labels'] as const) {
      expect(adversaryOf(kind).tamper).toBeNull();
      expect(sent(kind)).toEqual([1, -2, 3]);
    }
  });

  it('stale sends each bucket as it was the step before (the first step as computed)', () => {
    const a = adversaryOf('stale');
    const step = (v0: number[], v1: number[]) => {
      const b0 = bucket(v0);
      const b1 = bucket(v1);
      a.tamper!.apply(b1, 10); // buckets come in any order: keyed by offset
      a.tamper!.apply(b0, 0);
      return [[...b0], [...b1]];
    };
    expect(step([1, 2], [3])).toEqual([[1, 2], [3]]);
    expect(step([4, 5], [6])).toEqual([[1, 2], [3]]);
    expect(step([7, 8], [9])).toEqual([[4, 5], [6]]);
  });

  it('half computes the first half of its slice, other-images other ids of the split, flip-labels y + 1 mod C', () => {
    const ids = [5, 9, 2, 7, 11];
    expect(adversaryOf('half').ids(ids, 100)).toEqual([5, 9, 2]);
    const other = adversaryOf('other-images').ids(ids, 100);
    expect(other).toHaveLength(ids.length);
    for (const [k, id] of other.entries()) {
      expect(id).toBeGreaterThanOrEqual(0);
      expect(id).toBeLessThan(100);
      expect(id).not.toBe(ids[k]);
    }
    expect(adversaryOf('sign-flip').ids(ids, 100)).toEqual(ids);
    expect([...adversaryOf('flip-labels').labels(Int32Array.from([0, 3, 9]), 10)]).toEqual([1, 4, 0]);
    expect([...adversaryOf('scale').labels(Int32Array.from([0, 3, 9]), 10)]).toEqual([0, 3, 9]);
  });

  it('a colluder audits as it cheats where its cheat repeats; noise, stale and lie audit honestly', () => {
    expect(adversaryOf('sign-flip').colludes).toBe(false);
    expect(adversaryOf('sign-flip').auditTamper).toBeNull();
    const c = adversaryOf('sign-flip', 1, true);
    expect(c.colludes).toBe(true);
    const p = bucket([1, -2]);
    c.auditTamper!.apply(p, 0);
    expect([...p]).toEqual([-1, 2]);
    expect(adversaryOf('flip-labels', 1, true)).toMatchObject({ colludes: true, auditTamper: null });
    for (const kind of ['noise', 'stale', 'lie'] as const) expect(adversaryOf(kind, 1, true)).toMatchObject({ colludes: false, auditTamper: null });
  });
});
