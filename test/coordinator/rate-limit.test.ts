// Rate limits: the token bucket itself, joins per address (429 with a reason), and a session
// that floods valid messages is cut off.
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../coordinator/rate-limit.ts';

describe('RateLimiter', () => {
  it('allows a burst, then perSecond, per key', () => {
    let t = 0;
    const r = new RateLimiter({ perSecond: 2, burst: 3 }, 100, () => t);
    expect([r.take('a'), r.take('a'), r.take('a'), r.take('a')]).toEqual([true, true, true, false]);
    expect(r.take('b')).toBe(true);
    t = 500;
    expect([r.take('a'), r.take('a')]).toEqual([true, false]);
    t = 10_000;
    expect([r.take('a'), r.take('a'), r.take('a'), r.take('a')]).toEqual([true, true, true, false]);
  });

  it('keeps at most maxKeys keys, dropping the idle one', () => {
    let t = 0;
    const r = new RateLimiter({ perSecond: 1, burst: 1 }, 3, () => t);
    for (const k of ['a', 'b', 'c']) r.take(k);
    t = 1;
    r.take('a');
    r.take('d'); // evicts b, the least recently used
    expect(r.size).toBe(3);
    expect(r.take('a')).toBe(false); // a kept its empty bucket
    expect(r.take('b')).toBe(true); // b is new again
  });

  it('refuses nonsense limits', () => {
    expect(() => new RateLimiter({ perSecond: 0, burst: 1 })).toThrow(/perSecond > 0/);
  });
});
