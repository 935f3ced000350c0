// Small statistics shared by the page, the coordinator and the benches. Pure.

/** The median (mean of the middle two for an even count); 0 for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length === 0 ? 0 : s.length % 2 ? s[h]! : (s[h - 1]! + s[h]!) / 2;
}
