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
// 3. Suspicion: how far each member's contribution sits from what an honest slice of its size
//    would send in this step, which decides whose slices an audit looks at first. Slices differ
//    in size (work stealing, the last slices of a step, slow members), and a slice's gradient is
//    the sum of its k images': its squared norm is about k noise + k^2 signal, its component along
//    the rest of the sum about k times the mean's. The step's signal and noise are fitted to all
//    the members by medians; each member's norm is compared with the norm expected for its k, and
//    its component along the rest with the expected one, each in robust units of the honest spread
//    at its size. It accuses nobody: only a failed audit does.
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
  /** Its norm over the norm the step's fit expects of an honest slice of its size (1: as expected). */
  normRatio: number;
  /**
   * Its component along the rest of the sum less the component the fit expects of its size, over its expected norm:
   * about 0 for an honest member, -c for one that carries none of the step's direction (zeros, noise), -2c for one
   * reversed, where c is the cosine an honest member of its size has with the rest.
   */
  projection: number;
  /** How far it strays, in robust units (suspects): the larger of its norm's distance and its projection's shortfall. */
  score: number;
}

/** How far (in robust units) a member's contribution must stray from the others' to be audited next (suspects). */
export const SUSPECT_Z = 6;
/**
 * The smallest robust units: of a log norm ratio (at a slice of SPREAD_IMAGES images) and of a projection. A ring of a few
 * members that happen to agree closely has a median absolute deviation near 0, which would make any honest difference
 * look huge (in a ring of 3 the fit leaves one value free). A projection's is the count sketch's own error (1 / sqrt(128
 * buckets) = 0.09 of the norms), at every slice size; a log norm's the least spread real gradients of 32 images showed
 * (0.1 to 0.3: the small CNN on MNIST and on CIFAR-10, in trial runs of test/coordinator/trust-suspects.test.ts's steps).
 */
export const SUSPECT_FLOOR = { logNorm: 0.1, projection: 0.1 } as const;
/**
 * The slice size at which an honest log norm ratio's spread stops shrinking like 1/sqrt(images): per-image gradients'
 * norms are heavy-tailed (a few hard images carry most of a slice's), so a slice of 2 strays an e-fold where one of 32
 * strays a tenth of one; beyond a few dozen images the spread is that of the gradient noise's shape. Measured on real
 * gradients (trial runs of test/coordinator/trust-suspects.test.ts's steps, MNIST and CIFAR-10: 8 to 128 fit about as well).
 */
export const SPREAD_IMAGES = 32;

/** What an honest slice of k images is expected to contribute this step, fitted to all members (robustly). */
interface StepFit {
  /** The mean per-image gradient's squared norm (the signal): E<g_i, g_j> = k_i k_j signal for two honest slices. */
  signal: number;
  /** The per-image gradients' variance (the noise): E|g_i|^2 = k_i noise + k_i^2 signal. */
  noise: number;
  /** The mean per-image gradient's component along the step's sum: E<g_i, rest_i> = k_i (along - k_i own_i). */
  along: number;
  /**
   * Per member: its own signal per image as the others see it, the median over them of <g_i, g_j> / (k_i k_j): about the
   * step's signal for an honest member, 0 for noise or zeros, negative for a reversed gradient. What it takes out of the
   * sum is its own, not what its size would carry: the rest of a member that sends noise holds all the others' signal.
   */
  own: number[];
}

/** The median of the finite values (a NaN sketch must not reorder the others); 0 for none. */
const finiteMedian = (xs: readonly number[]): number => median(xs.filter(Number.isFinite));

/**
 * The step's fit from the members with images (`live`, 3 or more): each estimate is a median over the members, so one
 * member moves it by at most one rank whatever it sends. The signal is a repeated median of the pairs' <g_i, g_j> /
 * (k_i k_j) (a member is in one of each other member's pairs); `along` is fitted, not taken as the rest's count of
 * images: a member that carries no signal (noise, zeros) takes its share out of every other member's rest.
 */
function fitStep(parts: readonly Contribution[], live: readonly number[], norm2: readonly number[], dots: readonly number[]): StepFit {
  const k = (i: number): number => parts[i]!.images;
  // Each pair's <g_i, g_j> / (k_i k_j) once (it is symmetric), into both members' lists in the order of `live`.
  const pairs = new Map<number, number[]>(live.map((i) => [i, []]));
  live.forEach((i, a) => {
    for (const j of live.slice(a + 1)) {
      const v = sketchDot(parts[i]!.sketch, parts[j]!.sketch) / (k(i) * k(j));
      pairs.get(i)!.push(v);
      pairs.get(j)!.push(v);
    }
  });
  const own = parts.map((_, i) => { const p = pairs.get(i); return p ? finiteMedian(p) : 0; });
  const signal = Math.max(0, finiteMedian(live.map((i) => own[i]!)));
  const noise = Math.max(0, finiteMedian(live.map((i) => (norm2[i]! - k(i) ** 2 * signal) / k(i))));
  const along = finiteMedian(live.map((i) => dots[i]! / k(i) + k(i) * own[i]!));
  return { signal, noise, along, own };
}

/**
 * A member's distance from the fit, and the honest spread of each at its slice size relative to other sizes: of the log
 * norm ratio, 1 at SPREAD_IMAGES images, larger below; of the projection, sqrt(noise / (noise + k signal)): 1 where the
 * noise dominates, shrinking like 1/sqrt(k) where the signal does (the noise along the rest is a sum of k images' while
 * the expected norm grows like k). Or, where an honest member contributes exactly zero (an empty slice, or a step whose
 * members all sent zeros), whether it sent anything.
 */
type Residual =
  | { kind: 'fitted'; logNorm: number; normSpread: number; projection: number; alongSpread: number }
  | { kind: 'zero'; sent: boolean };

/** The members' residuals (null: fewer than 3 members with images, nothing to compare an honest spread with). */
function residuals(parts: readonly Contribution[]): Residual[] | null {
  const total = addSketches(parts.map((p) => p.sketch));
  const rests = parts.map((p): GradientSketch => ({ seed: total.seed, sums: total.sums.map((s, b) => s - p.sketch.sums[b]!), squares: total.squares }));
  const norm2 = parts.map((p) => sketchNorm2(p.sketch));
  const dots = parts.map((p, i) => sketchDot(p.sketch, rests[i]!));
  const live = parts.flatMap((p, i) => (p.images > 0 ? [i] : []));
  if (live.length < 3) return null;
  const fit = fitStep(parts, live, norm2, dots);
  return parts.map((p, i): Residual => {
    const k = p.images;
    const expected = k > 0 ? k * fit.noise + k * k * fit.signal : 0;
    if (!(expected > 0)) return { kind: 'zero', sent: norm2[i]! > 0 };
    const restNorm = Math.sqrt(Math.max(0, sketchDot(rests[i]!, rests[i]!)));
    return {
      kind: 'fitted',
      logNorm: 0.5 * Math.log(norm2[i]! / expected),
      normSpread: Math.sqrt((1 / k + 1 / SPREAD_IMAGES) / (2 / SPREAD_IMAGES)),
      projection: restNorm > 0 ? (dots[i]! - k * (fit.along - k * fit.own[i]!)) / (Math.sqrt(expected) * restNorm) : 0,
      alongSpread: Math.sqrt((k * fit.noise) / expected),
    };
  });
}

/** The robust centre (median) and unit (1.4826 median absolute deviations, at least `floor`) of the finite values. */
function robust(values: readonly number[], floor: number): { mid: number; unit: number } {
  const finite = values.filter(Number.isFinite);
  const mid = median(finite);
  return { mid, unit: Math.max(1.4826 * median(finite.map((v) => Math.abs(v - mid))), floor) };
}

/**
 * The members ranked by how far their contribution strays from what an honest slice of their size would send this step
 * (strangest first). A slice's gradient is the sum of its k images' gradients, each the step's mean plus noise, so an
 * honest slice's squared norm is about k noise + k^2 signal and its component along the rest of the sum about k times
 * the mean's: each member is compared with that expectation for its own k, never with the others' raw values (honestly,
 * a small slice's norm per image is larger and its cosine with the rest lower). In robust units over the members, each
 * distance divided by the honest spread at its size first: its log norm ratio's distance from the members' median, its
 * projection's shortfall below theirs.
 */
export function suspicion(parts: readonly Contribution[]): Suspicion[] {
  // A sketch with a NaN or an infinity strays as far as can be, and is left out of the others' rest.
  const finite = (s: GradientSketch): boolean => s.sums.every(Number.isFinite) && s.squares.every(Number.isFinite);
  const kept = parts.flatMap((p, i) => (finite(p.sketch) ? [i] : []));
  const res = kept.length ? residuals(kept.map((i) => parts[i]!)) : null;
  const fitted = (res ?? []).flatMap((r) => (r.kind === 'fitted' ? [r] : []));
  const norm = robust(fitted.map((r) => r.logNorm / r.normSpread), SUSPECT_FLOOR.logNorm);
  const along = robust(fitted.map((r) => r.projection / r.alongSpread), 0);
  return parts.map((_, index) => {
    const j = kept.indexOf(index);
    if (j < 0) return { index, normRatio: NaN, projection: NaN, score: Infinity };
    // Fewer than 3 members with images leave nothing to compare an honest spread with.
    if (!res) return { index, normRatio: 1, projection: 0, score: 0 };
    const r = res[j]!;
    // Where an honest member sends zero, anything else is as far off as can be.
    if (r.kind === 'zero') return { index, normRatio: r.sent ? Infinity : 1, projection: 0, score: r.sent ? Infinity : 0 };
    const normZ = Math.abs(r.logNorm / r.normSpread - norm.mid) / norm.unit;
    // The floor applies to each member's unit: the sketch's error does not shrink with the slice's size.
    const alongZ = (along.mid * r.alongSpread - r.projection) / Math.max(along.unit * r.alongSpread, SUSPECT_FLOOR.projection);
    return { index, normRatio: Math.exp(r.logNorm), projection: r.projection, score: Math.max(normZ, alongZ) };
  }).sort((a, b) => b.score - a.score || a.index - b.index);
}

/**
 * The members (indices into `parts`) whose contribution strays more than `z` robust units from what an honest slice of
 * its size would send this step (suspicion's score: units of 1.4826 median absolute deviations over the members, at
 * least SUSPECT_FLOOR), strangest first. A suspect is audited, never accused: only an audit that disagrees accuses.
 */
export function suspects(parts: readonly Contribution[], z = SUSPECT_Z): number[] {
  return suspicion(parts).filter((s) => !(s.score <= z)).map((s) => s.index);
}
