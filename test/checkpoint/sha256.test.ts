// The portable SHA-256 against node:crypto on lengths around the 64-byte block and padding
// edges, split into chunks at awkward places; under Node newSha256() is node:crypto's own.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Sha256, nativeSha256, newSha256, sha256Hex, toHex } from '../../src/checkpoint/sha256.ts';
import { makeRng } from '../../src/rng.ts';

describe('sha256', () => {
  it('matches node:crypto for lengths 0..200 and 100k, in one piece and in odd chunks', () => {
    const rng = makeRng(5);
    for (const n of [...Array.from({ length: 201 }, (_, i) => i), 100_003]) {
      const data = new Uint8Array(n);
      for (let i = 0; i < n; i++) data[i] = rng.int(256);
      const want = createHash('sha256').update(data).digest('hex');
      expect(toHex(new Sha256().update(data).digest()), `length ${n}`).toBe(want);
      expect(sha256Hex(data), `length ${n}`).toBe(want);
      const h = new Sha256();
      for (let i = 0; i < n; i += 7 + (i % 61)) h.update(data.subarray(i, Math.min(n, i + 7 + (i % 61))));
      expect(toHex(h.digest()), `chunked length ${n}`).toBe(want);
    }
  });
  it('under Node, newSha256 is the native hash, chunked alike', () => {
    expect(nativeSha256).toBe(true);
    const data = new TextEncoder().encode('a'.repeat(1000));
    expect(toHex(newSha256().update(data.subarray(0, 3)).update(data.subarray(3)).digest())).toBe(createHash('sha256').update(data).digest('hex'));
  });
  it('known answer: "abc"', () => {
    expect(sha256Hex(new TextEncoder().encode('abc'))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
