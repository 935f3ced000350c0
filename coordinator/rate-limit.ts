// Token buckets: each key (a client address, a session) may make `burst` requests at once and
// `perSecond` more every second. The map of keys is bounded: when full, the key idle longest
// goes first (a flood of fresh addresses cannot grow it without end).
export interface RateLimit { perSecond: number; burst: number }

export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly limit: RateLimit, private readonly maxKeys = 10_000, private readonly now: () => number = Date.now) {
    if (!(limit.perSecond > 0 && limit.burst >= 1)) throw new RangeError(`a rate limit needs perSecond > 0 and burst >= 1, got ${JSON.stringify(limit)}`);
  }

  /** Takes one token for `key`; false when there is none (the caller refuses the request). */
  take(key: string): boolean {
    const t = this.now();
    let b = this.buckets.get(key);
    if (b) {
      this.buckets.delete(key); // re-inserted below: Map order is recency order
      b.tokens = Math.min(this.limit.burst, b.tokens + ((t - b.at) / 1000) * this.limit.perSecond);
      b.at = t;
    } else {
      if (this.buckets.size >= this.maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
      b = { tokens: this.limit.burst, at: t };
    }
    this.buckets.set(key, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  get size(): number {
    return this.buckets.size;
  }
}
