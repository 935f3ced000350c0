// The coordinator's checks of untrusted contributions (issue 46), on the linear sketches peers
// report (src/trust/sketch.ts). Pure.
//
// 1. The sum check (each step): the sketches of what each member put into the ring must add up
//    to the sketch of the sum every member got back, within the wire's rounding. The ring rounds
//    a partial sum at each of its n hops (and float32 adds it), so an element's error has a
//    standard deviation of at most n eps sqrt(sum_i g_i^2 / 3) (Cauchy-Schwarz on the partial
//    sums; eps half a unit in the last place of the wire format), and a bucket's at most
//    n eps sqrt(sum_i squares_i / 3). A bucket more than Z_LIMIT of those off fails the step.
//    Each member's squares count at most SQUARES_CAP times the median member's per image, so a
//    member cannot widen the tolerance by inflating its own. Not for the i8 wire: its rounding
//    follows each frame's largest value, and its error feedback moves values between steps.
// 2. The audit check: a second peer recomputed a member's slice on the same weights; their
//    sketches must agree within the honest spread between engines (float32 sums in another
//    order: WebGPU against wasm, Chromium against Node), `rel` of each bucket's norm.
// 3. Suspicion: how far each member's contribution sits from the others' (its direction
//    against the rest of the sum, and its norm per image against the median), which decides
//    whose slices an audit looks at first. It accuses nobody: only a failed audit does.
import { addSketches, sketchDot, sketchNorm2, type GradientSketch } from '../src/trust/sketch.ts';
import { median } from '../src/stats.ts';

export const Z_LIMIT = 8;
export const SQUARES_CAP = 4;
/** Half a unit in the last place, relative, of each wire format the sum check covers (float32 accumulation on top). */
export const WIRE_EPS = { f32: 2 ** -24, f16: 2 ** -11, bf16: 2 ** -8 } as const;
export type CheckedWire = keyof typeof WIRE_EPS;

export interface Contribution { sketch: GradientSketch; images: number }

export interface SumVerdict {
  ok: boolean;
  /** The bucket furthest off, in standard deviations of the wire's rounding. */
  bucket: number;
  z: number;
}

/** Whether the members' `parts` add up to `total` (what the ring returned) over a ring of `ringSize` on `wire`. */
export function sumCheck(parts: readonly Contribution[], total: GradientSketch, wire: CheckedWire, ringSize: number): SumVerdict {
  const added = addSketches(parts.map((p) => p.sketch));
  if (added.seed !== total.seed || added.sums.length !== total.sums.length) throw new RangeError('the sum check needs the sketches of one seed and size');
  const eps = Math.hypot(WIRE_EPS[wire], WIRE_EPS.f32);
  const squares = cappedSquares(parts);
  let worst = { bucket: 0, z: 0 };
  for (let b = 0; b < total.sums.length; b++) {
    const sigma = Math.max(ringSize, 1) * eps * Math.sqrt(squares[b]! / 3) + Number.MIN_VALUE;
    const z = Math.abs(added.sums[b]! - total.sums[b]!) / sigma;
    if (z > worst.z || Number.isNaN(z)) worst = { bucket: b, z: Number.isNaN(z) ? Infinity : z };
  }
  return { ok: worst.z <= Z_LIMIT, ...worst };
}

/** Per bucket, the members' squares with each capped at SQUARES_CAP times the median member's per image squared. */
function cappedSquares(parts: readonly Contribution[]): Float64Array {
  const k = parts[0]!.sketch.squares.length;
  const out = new Float64Array(k);
  const perImage = (p: Contribution, b: number): number => p.sketch.squares[b]! / Math.max(1, p.images) ** 2;
  for (let b = 0; b < k; b++) {
    const m = median(parts.map((p) => perImage(p, b)));
    for (const p of parts) out[b]! += Math.min(p.sketch.squares[b]!, SQUARES_CAP * m * Math.max(1, p.images) ** 2);
  }
  return out;
}

/**
 * The honest spread allowed between two engines' float32 gradients of one slice, relative to a
 * bucket's norm (one standard unit; Z_LIMIT of them fail an audit). Measured (test/distributed/
 * verify.test.ts, small CNN, WebGPU on llvmpipe and wasm peers auditing each other every step):
 * below 5e-6 in every audit but one, a WebGPU peer's first step at 1.2e-2 (reproduced twice, not
 * in isolation: the same gradient computed on both engines in one process agrees below 5e-6).
 * 1e-2 passes that with 8x to spare and still puts every attack of test/trust at hundreds of units.
 */
export const AUDIT_REL = 1e-2;

export interface AuditVerdict { ok: boolean; bucket: number; z: number }

/** Whether `claimed` (the member's) and `recomputed` (the auditor's) sketch the same gradient within `rel`. */
export function auditCheck(claimed: GradientSketch, recomputed: GradientSketch, rel = AUDIT_REL): AuditVerdict {
  if (claimed.seed !== recomputed.seed || claimed.sums.length !== recomputed.sums.length) {
    throw new RangeError('an audit compares sketches of one seed and size');
  }
  let worst = { bucket: 0, z: 0 };
  for (let b = 0; b < claimed.sums.length; b++) {
    const norm = Math.sqrt(Math.max(claimed.squares[b]!, recomputed.squares[b]!));
    const scale = rel * norm + Number.MIN_VALUE;
    // The signed sums, and the norms themselves (a gradient scaled or zeroed moves them at once).
    const z = Math.max(Math.abs(claimed.sums[b]! - recomputed.sums[b]!), Math.abs(Math.sqrt(claimed.squares[b]!) - Math.sqrt(recomputed.squares[b]!))) / scale;
    if (z > worst.z || Number.isNaN(z)) worst = { bucket: b, z: Number.isNaN(z) ? Infinity : z };
  }
  return { ok: worst.z <= Z_LIMIT, ...worst };
}

export interface Suspicion {
  /** Index into the parts. */
  index: number;
  /** The cosine between its contribution and the rest of the sum (count-sketch estimate). */
  cosine: number;
  /** Its norm per image over the median member's. */
  normRatio: number;
  /** Larger is stranger: how far below the median cosine it points, plus how far its norm strays (log). */
  score: number;
}

/** The members ranked by how strange their contribution looks next to the others' (strangest first). */
export function suspicion(parts: readonly Contribution[]): Suspicion[] {
  const total = addSketches(parts.map((p) => p.sketch));
  const norms = parts.map((p) => Math.sqrt(sketchNorm2(p.sketch)) / Math.max(1, p.images));
  const mNorm = median(norms);
  const cosines = parts.map((p) => {
    const rest: GradientSketch = { seed: total.seed, sums: total.sums.map((s, b) => s - p.sketch.sums[b]!), squares: total.squares };
    const own = Math.sqrt(sketchDot(p.sketch, p.sketch));
    const others = Math.sqrt(sketchDot(rest, rest));
    return own > 0 && others > 0 ? sketchDot(p.sketch, rest) / (own * others) : 0;
  });
  const mCos = median(cosines);
  return parts.map((_, index) => {
    const normRatio = mNorm > 0 ? norms[index]! / mNorm : 1;
    const strays = normRatio > 0 ? Math.abs(Math.log(normRatio)) : Infinity;
    return { index, cosine: cosines[index]!, normRatio, score: Math.max(0, mCos - cosines[index]!) + strays };
  }).sort((a, b) => b.score - a.score);
}

/** How far (in robust standard units) a member's contribution must stray from the others' to be audited next (suspects). */
export const SUSPECT_Z = 6;
/**
 * The smallest spread the robust units assume: a cosine's and a log norm's. A ring of a few
 * members that happen to agree closely has a median absolute deviation near 0, which would make
 * any honest difference look huge.
 */
export const SUSPECT_FLOOR = { cosine: 0.05, logNorm: 0.05 } as const;

/**
 * The members (indices into `parts`) whose contribution strays more than `z` robust units from the
 * others' (suspicion's cosine below the median, or its log norm per image away from the median;
 * units: 1.4826 median absolute deviations, at least SUSPECT_FLOOR), strangest first. A suspect is
 * audited, never accused: only an audit that disagrees accuses.
 */
export function suspects(parts: readonly Contribution[], z = SUSPECT_Z): number[] {
  if (parts.length < 3) return [];
  const s = suspicion(parts);
  const robust = (values: readonly number[], floor: number): { mid: number; unit: number } => {
    const finite = values.filter(Number.isFinite);
    const mid = finite.length ? median(finite) : 0;
    const mad = finite.length ? median(finite.map((v) => Math.abs(v - mid))) : 0;
    return { mid, unit: Math.max(1.4826 * mad, floor) };
  };
  const cos = robust(s.map((x) => x.cosine), SUSPECT_FLOOR.cosine);
  const logNorm = (x: Suspicion): number => (x.normRatio > 0 ? Math.log(x.normRatio) : -Infinity);
  const norm = robust(s.map(logNorm), SUSPECT_FLOOR.logNorm);
  return s
    .map((x) => ({ index: x.index, z: Math.max((cos.mid - x.cosine) / cos.unit, Math.abs(logNorm(x) - norm.mid) / norm.unit) }))
    .filter((x) => !(x.z <= z))
    .sort((a, b) => b.z - a.z)
    .map((x) => x.index);
}
