// float64 reference: elementwise add, scale, axpy, fill, with their backwards.

export function add(x: Float64Array, y: Float64Array): Float64Array {
  return x.map((v, i) => v + y[i]!);
}

/** z = x + y: dx = dz, dy = dz. */
export function addBackward(dz: Float64Array): [Float64Array, Float64Array] {
  return [Float64Array.from(dz), Float64Array.from(dz)];
}

export function scale(x: Float64Array, a: number): Float64Array {
  return x.map((v) => a * v);
}

/** y = a x: dx = a dy. */
export function scaleBackward(dy: Float64Array, a: number): Float64Array {
  return scale(dy, a);
}

/** Returns y + a x (the new y). */
export function axpy(a: number, x: Float64Array, y: Float64Array): Float64Array {
  return y.map((v, i) => v + a * x[i]!);
}

/** y' = y + a x: dx = a dy', dy = dy'. */
export function axpyBackward(dout: Float64Array, a: number): [Float64Array, Float64Array] {
  return [scale(dout, a), Float64Array.from(dout)];
}

export function fill(n: number, a: number): Float64Array {
  return new Float64Array(n).fill(a);
}
