// The optimiser step every volunteer runs, whatever its compute backend: the ONE agreed
// implementation that keeps the weights of a mixed ring (WebGPU peers, wasm peers, different
// GPUs) bitwise identical. After the all-reduce every peer holds the same gradient sum G
// (the ring's reduce-scatter fixes one summation order per chunk and the all-gather copies
// its bits), and this step is plain IEEE arithmetic in a fixed order: float64 for the norms
// and the per-element expressions (+, -, *, /, sqrt are exactly rounded in every JS engine),
// rounded to float32 where stored. A GPU's update kernel would give each GPU model its own
// last bits (fused multiply-add, reduction trees), and the per-step checksum would then evict
// honest peers. Costs ~10 flops per parameter on the CPU, next to an all-reduce that already
// moves G through the CPU.
//
// Same formulas as shaders/lars.wgsl and src/ref/optim.ts:
//   lars: lambda = eta ||w|| / (||g|| + beta ||w||) (1 when not adapted or a norm is 0; a
//         tensor with trustFrom takes that segment's lambda),
//         v <- m v + (lr lambda)(g + beta w);  w <- w - v
//   sgd:  d = g + beta w;  v <- m v + lr d;  w <- w - v  (Nesterov: w <- w - (m v + lr d))
// with g = G * gradScale and beta = 0 on segments without decay.
import { OptimError } from './errors.ts';
import { learningRate } from './schedule.ts';
import { checkTrustFrom } from './table.ts';
import type { OptimizerConfig, ParamSegment } from './types.ts';

export interface HostStepArgs {
  w: Float32Array;
  v: Float32Array;
  /** Gradient SUM over the global batch (not modified). */
  G: Float32Array;
  /** 0-based step index (selects the scheduled rate). */
  t: number;
  /** 1 / global batch. */
  gradScale: number;
}

/**
 * The sums of squares of w[off, off + len) and of G[off, off + len) times scale, in float64, each
 * in index order. One pass with two independent chains: each sum is the same as a pass of its
 * own would give, bit for bit, in about half the time (a pass is bound by the add's latency).
 */
export function sumSquares2(w: Float32Array, G: Float32Array, off: number, len: number, scale: number): { ww: number; gg: number } {
  let ww = 0, gg = 0;
  for (let i = off; i < off + len; i++) {
    const a = w[i]!;
    ww += a * a;
    const g = G[i]! * scale;
    gg += g * g;
  }
  return { ww, gg };
}

/**
 * The step's two loops over a segment [off, off + len) of the step's arrays: the sums of squares (sumSquares2) and the
 * update. JavaScript's below; src/optim/host-wasm.ts runs the same arithmetic in wasm on arrays in its memory, with the
 * same bits (test/optim/host-wasm.test.ts).
 */
export interface StepLoops {
  norms(off: number, len: number, scale: number): { ww: number; gg: number };
  update(off: number, len: number, gradScale: number, beta: number, rate: number, m: number, nesterov: boolean): void;
}

/** The loops in JavaScript on a step's arrays. */
export function jsLoops(a: HostStepArgs): StepLoops {
  const { w, v, G } = a;
  return {
    norms: (off, len, scale) => sumSquares2(w, G, off, len, scale),
    update: (off, len, gradScale, beta, rate, m, nesterov) => {
      for (let i = off; i < off + len; i++) {
        const wi = w[i]!;
        const d = G[i]! * gradScale + beta * wi;
        const vi = Math.fround(m * v[i]! + rate * d);
        v[i] = vi;
        w[i] = nesterov ? wi - (m * vi + rate * d) : wi - vi;
      }
    },
  };
}

/**
 * One optimiser step in place on w and v (see the file comment for why on the host); `loops` runs the per-element
 * work (JavaScript's by default; the wasm loops where a.w, a.v and a.G are their arrays).
 */
export function hostOptimizerStep(cfg: OptimizerConfig, segments: readonly ParamSegment[], a: HostStepArgs, loops: StepLoops = jsLoops(a)): void {
  const n = a.w.length;
  if (a.v.length !== n || a.G.length !== n) throw new OptimError('bad-input', `w, v and G must have the same length, got ${n}, ${a.v.length}, ${a.G.length}`);
  if (!Number.isFinite(a.gradScale) || a.gradScale <= 0) {
    throw new OptimError('bad-input', `gradScale must be a finite number > 0 (1 / global batch), got ${a.gradScale}`);
  }
  const lr = learningRate(cfg, a.t);
  const m = cfg.momentum;
  const { gradScale } = a;
  for (const s of segments) {
    if (s.offset < 0 || s.offset + s.length > n) {
      throw new OptimError('bad-input', `segment ${s.name} [${s.offset}, ${s.offset + s.length}) is outside the ${n} parameters`);
    }
  }
  // LARS: every adapted segment's rate from the norms BEFORE any update (a tensor with
  // trustFrom takes its layer weight's, whatever the order of the segments).
  const rates = segments.map(() => lr);
  if (cfg.kind === 'lars') {
    checkTrustFrom(segments);
    segments.forEach((s, i) => {
      if (!s.adapt) return;
      const beta = s.decay ? cfg.weightDecay : 0;
      const { ww, gg } = loops.norms(s.offset, s.length, gradScale);
      const wn = Math.sqrt(ww), gn = Math.sqrt(gg);
      if (wn > 0 && gn > 0) rates[i] = lr * ((cfg.eta * wn) / (gn + beta * wn));
    });
    segments.forEach((s, i) => {
      if (!s.adapt && s.trustFrom !== undefined) rates[i] = rates[s.trustFrom]!;
    });
  }
  const nesterov = cfg.kind === 'sgd' && cfg.nesterov;
  segments.forEach((s, i) => loops.update(s.offset, s.length, gradScale, s.decay ? cfg.weightDecay : 0, rates[i]!, m, nesterov));
}
