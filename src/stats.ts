// Small statistics shared by the page, the coordinator and the benches. Pure.

/** The median (mean of the middle two for an even count); 0 for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length === 0 ? 0 : s.length % 2 ? s[h]! : (s[h - 1]! + s[h]!) / 2;
}

/** The q-quantile (0..1) by linear interpolation between the nearest ranks; 0 for none. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return 0;
  const at = Math.min(1, Math.max(0, q)) * (s.length - 1);
  const lo = Math.floor(at);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo);
}
