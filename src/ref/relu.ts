// float64 reference: ReLU.
export function reluForward(x: Float64Array): Float64Array {
  return x.map((v) => (v > 0 ? v : 0));
}

export function reluBackward(x: Float64Array, dy: Float64Array): Float64Array {
  return x.map((v, i) => (v > 0 ? dy[i]! : 0));
}
