// Central finite differences for float64 references. A reference op is checked through
// the scalar L = sum(forward(inputs) * R) with a fixed random R, so dL/dout = R and the
// reference's backward(R) must equal the numerical dL/dinput for every input element.
import { compareArrays, type Tolerance } from './compare.ts';

export interface GradCheckSpec {
  /** Inputs to differentiate with respect to (others are captured by the closures). */
  inputs: Float64Array[];
  forward: (inputs: Float64Array[]) => Float64Array;
  /** Returns dL/dinput for each input, given dL/dout. */
  backward: (inputs: Float64Array[], dout: Float64Array) => Float64Array[];
  /** Which inputs to check (default: all). */
  check?: number[];
  eps?: number;
  tol?: Tolerance;
  seed?: number;
}

export function numericalGrads(spec: GradCheckSpec, R: Float64Array): Float64Array[] {
  const eps = spec.eps ?? 1e-6;
  const loss = (ins: Float64Array[]): number => {
    const y = spec.forward(ins);
    let s = 0;
    for (let i = 0; i < y.length; i++) s += y[i]! * R[i]!;
    return s;
  };
  const which = spec.check ?? spec.inputs.map((_, i) => i);
  return spec.inputs.map((x, k) => {
    const g = new Float64Array(x.length);
    if (!which.includes(k)) return g;
    for (let i = 0; i < x.length; i++) {
      const old = x[i]!;
      x[i] = old + eps;
      const lp = loss(spec.inputs);
      x[i] = old - eps;
      const lm = loss(spec.inputs);
      x[i] = old;
      g[i] = (lp - lm) / (2 * eps);
    }
    return g;
  });
}

/** Returns an error message per mismatching input, or [] when the analytic gradients agree. */
export function gradCheck(spec: GradCheckSpec): string[] {
  const y = spec.forward(spec.inputs);
  let seed = spec.seed ?? 12345;
  const R = new Float64Array(y.length);
  for (let i = 0; i < R.length; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    R[i] = seed / 4294967296 - 0.5;
  }
  const analytic = spec.backward(spec.inputs, R);
  const numeric = numericalGrads(spec, R);
  const tol = spec.tol ?? { rtol: 1e-5, atol: 1e-7 };
  const which = spec.check ?? spec.inputs.map((_, i) => i);
  const errors: string[] = [];
  for (const k of which) {
    const r = compareArrays(analytic[k]!, numeric[k]!, tol, `d/dinput${k}`);
    if (!r.ok) errors.push(r.message);
  }
  return errors;
}
