// Packs a uniform struct of 4-byte scalars (u32, i32, f32), in WGSL declaration order.
// All our shape uniforms are flat scalars, so the WGSL layout is simply 4 bytes each,
// padded to 16 bytes at the end.
export type Scalar = ['u32' | 'i32' | 'f32', number];

export function packUniforms(fields: readonly Scalar[]): ArrayBuffer {
  const bytes = Math.max(16, Math.ceil((fields.length * 4) / 16) * 16);
  const buf = new ArrayBuffer(bytes);
  const dv = new DataView(buf);
  fields.forEach(([type, v], i) => {
    if (type === 'f32') dv.setFloat32(i * 4, v, true);
    else if (type === 'i32') dv.setInt32(i * 4, v, true);
    else dv.setUint32(i * 4, v >>> 0, true);
  });
  return buf;
}

/** Shorthand for a list of u32 fields. */
export function u32s(...values: number[]): Scalar[] {
  return values.map((v) => ['u32', v] as Scalar);
}
