import { describe, expect, it } from 'vitest';
import { pastEdge } from '../../bench/rate-grid.ts';

const t = (lr: number, val: number, diverged = false) => ({ lr, val, diverged });

describe('rate grid', () => {
  it('an inside best ends the search', () => {
    expect(pastEdge([t(0.01, 0.5), t(0.02, 0.6), t(0.05, 0.4)])).toBeNull();
  });
  it('a best on the low edge halves, on the high edge doubles, in any order of trying', () => {
    expect(pastEdge([t(0.02, 0.57), t(0.01, 0.60), t(0.05, 0.10, true)])).toBe(0.005);
    expect(pastEdge([t(2, 0.3), t(4, 0.4), t(8, 0.45)])).toBe(16);
    // After one extension the old edge is inside.
    expect(pastEdge([t(0.01, 0.60), t(0.02, 0.57), t(0.005, 0.58)])).toBeNull();
  });
  it('when everything diverged, it goes below the lowest rate', () => {
    expect(pastEdge([t(4, 0.1, true), t(8, 0.1, true)])).toBe(2);
  });
  it('refuses an empty grid', () => {
    expect(() => pastEdge([])).toThrow(/no rates/);
  });
});
