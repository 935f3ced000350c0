// The per-step weight checksum every peer reports: a 64-bit hash of the flat parameter
// buffer's bits, so two peers agree exactly when their weights are bitwise equal (up to the
// 2^-64 chance of a collision). Two 32-bit multiply-xorshift lanes over the u32 words: about
// 1 GB/s in V8, so it costs little next to the step (sha256 would be 5-10x slower).

export function weightChecksum(w: Float32Array): string {
  const u = new Uint32Array(w.buffer, w.byteOffset, w.length);
  let a = 0x9e3779b9 ^ u.length;
  let b = 0x85ebca6b;
  for (let i = 0; i < u.length; i++) {
    const x = u[i]!;
    a = Math.imul(a ^ x, 0xcc9e2d51);
    a = (a << 15) | (a >>> 17);
    b = Math.imul(b + x + i, 0x1b873593);
    b ^= b >>> 13;
  }
  a = Math.imul(a ^ (a >>> 16), 0x85ebca6b);
  a ^= a >>> 13;
  b = Math.imul(b ^ (b >>> 15), 0xc2b2ae35);
  b ^= b >>> 16;
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}
