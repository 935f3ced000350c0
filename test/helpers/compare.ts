// Comparator for GPU results against float64 references: |a - e| <= atol + rtol * |e| per
// element. NaN and Inf are never "close" to a finite value; both NaN (or same-sign Inf) match.
// On failure it names the worst element, its index, and the max differences.

export interface Tolerance { rtol: number; atol: number }

export interface CompareReport {
  ok: boolean;
  worstIndex: number;
  maxAbs: number;
  maxRel: number;
  message: string;
}

type Numeric = ArrayLike<number>;

export function compareArrays(actual: Numeric, expected: Numeric, tol: Tolerance, what = 'values'): CompareReport {
  if (actual.length !== expected.length) {
    return { ok: false, worstIndex: -1, maxAbs: Infinity, maxRel: Infinity, message: `${what}: length ${actual.length}, expected ${expected.length}` };
  }
  let worst = -1, worstExcess = 0, maxAbs = 0, maxRel = 0, bad = 0;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!, e = expected[i]!;
    let excess: number;
    if (Number.isNaN(a) || Number.isNaN(e)) excess = Number.isNaN(a) && Number.isNaN(e) ? 0 : Infinity;
    else if (!Number.isFinite(a) || !Number.isFinite(e)) excess = a === e ? 0 : Infinity;
    else {
      const d = Math.abs(a - e);
      maxAbs = Math.max(maxAbs, d);
      if (Math.abs(e) > tol.atol) maxRel = Math.max(maxRel, d / Math.abs(e));
      excess = d - (tol.atol + tol.rtol * Math.abs(e));
    }
    if (excess > 0) bad++;
    if (excess > worstExcess || (worst < 0 && excess > 0)) { worstExcess = excess; worst = i; }
  }
  const ok = bad === 0;
  const message = ok
    ? `${what}: ${actual.length} ok (max abs ${maxAbs.toExponential(2)}, max rel ${maxRel.toExponential(2)})`
    : `${what}: ${bad}/${actual.length} outside rtol ${tol.rtol} atol ${tol.atol}; worst [${worst}] = ${actual[worst]} expected ${expected[worst]}; ` +
      `max abs ${maxAbs.toExponential(3)}, max rel ${maxRel.toExponential(3)}`;
  return { ok, worstIndex: worst, maxAbs, maxRel, message };
}

/** Throws with the comparator's message when the arrays differ. */
export function assertClose(actual: Numeric, expected: Numeric, tol: Tolerance, what = 'values'): void {
  const r = compareArrays(actual, expected, tol, what);
  if (!r.ok) throw new Error(r.message);
}

/** Stated tolerances (DEVELOPERS: forward ~1e-5 relative, gradients ~1e-4). */
export const FWD: Tolerance = { rtol: 1e-5, atol: 1e-5 };
export const GRAD: Tolerance = { rtol: 1e-4, atol: 1e-4 };

/**
 * Tolerance for a k-term float32 sum of products of values in [-1, 1]: partial sums grow like sqrt(k) and so does the
 * random walk of their roundings, so the absolute error grows like k 2^-24. Outputs that cancel to near zero (where
 * rtol gives no room) need that much atol: measured 2.5e-5 to 4.7e-5 for k = 576..1200 against FWD's 1e-5. `growth`
 * scales the k 2^-24 term for an algorithm that rounds more (WINOGRAD4_ROUNDING).
 */
export function kTermTol(base: Tolerance, k: number, growth = 1): Tolerance {
  return { rtol: base.rtol, atol: Math.max(base.atol, 2 * growth * k * 2 ** -24) };
}

/**
 * A convolution by Winograd F(4x4, 3x3) (the wasm engine's, src/wasm/ops-winograd.ts) rounds more than a direct sum:
 * its transforms multiply by up to 8 and 5 where F(2x2, 3x3)'s only add. Its k-term tolerance is this many times the
 * k 2^-24 a direct float32 sum gets (test/wasm/winograd.test.ts: ResNet's and awkward shapes need 3, 1 fails).
 */
export const WINOGRAD4_ROUNDING = 4;
