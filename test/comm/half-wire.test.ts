// Half-precision wire formats (bit-exact conversions, round to nearest even) and the ring in
// f16/bf16: float32 accumulation, bitwise-equal results on all peers, error within its bound.
import { describe, expect, it } from 'vitest';
import { allReduceSum, memoryRing } from '../../src/comm/index.ts';
import { decodeTable, f32BitsToBf16, f32BitsToF16 } from '../../src/protocol/half.ts';
import { bitwiseEqual, randomGrad, sum64, worstError } from './helpers.ts';

const bits = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0];

describe('half-precision conversions', () => {
  it('float16: known values, ties to even, subnormals, overflow, NaN', () => {
    const cases: [number, number][] = [
      [1, 0x3c00], [-2, 0xc000], [65504, 0x7bff], [65520, 0x7c00], [Infinity, 0x7c00],
      [2 ** -24, 0x0001], [2 ** -25, 0x0000], [1.5 * 2 ** -24, 0x0002], [2 ** -14, 0x0400],
      [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02], [0, 0], [-0, 0x8000],
    ];
    for (const [x, h] of cases) expect(f32BitsToF16(bits(x)).toString(16), `f16(${x})`).toBe(h.toString(16));
    expect(Number.isNaN(decodeTable('f16')[f32BitsToF16(bits(NaN))])).toBe(true);
  });

  it('every finite float16 and bfloat16 survives decode -> encode unchanged', () => {
    for (const fmt of ['f16', 'bf16'] as const) {
      const t = decodeTable(fmt);
      const enc = fmt === 'f16' ? f32BitsToF16 : f32BitsToBf16;
      for (let h = 0; h < 65536; h++) if (!Number.isNaN(t[h])) expect(enc(bits(t[h]))).toBe(h);
    }
  });

  it('bfloat16: known values and ties to even', () => {
    expect(f32BitsToBf16(bits(1))).toBe(0x3f80);
    expect(f32BitsToBf16(bits(1 + 2 ** -8))).toBe(0x3f80); // tie, even stays
    expect(f32BitsToBf16(bits(1 + 3 * 2 ** -8))).toBe(0x3f82); // tie, odd rounds up
    expect(Number.isNaN(decodeTable('bf16')[f32BitsToBf16(bits(NaN))])).toBe(true);
  });
});

describe('ring all-reduce with a half-precision wire', () => {
  // Per hop the partial sum is rounded once to 11 (f16) or 8 (bf16) significant bits: with N
  // peers at most N roundings, each <= 2^-p of the running |sum| <= sum |x_i|.
  const bound = { f16: (n: number) => n * 2 ** -11, bf16: (n: number) => n * 2 ** -8 };
  for (const wire of ['f16', 'bf16'] as const) {
    it(`${wire}: N=2..5, error within N * 2^-p, bitwise equal on all peers`, async () => {
      for (let n = 2; n <= 5; n++) {
        const ids = Array.from({ length: n }, (_, i) => `h${i}`);
        const { rings } = memoryRing(ids);
        const inputs = ids.map((_, i) => randomGrad(30_011, 9 + i));
        const outs = inputs.map((g) => g.slice());
        await Promise.all(rings.map((ring, i) => allReduceSum(outs[i], { ring, step: 0, wire, messageBytes: 4096 })));
        for (let i = 1; i < n; i++) expect(bitwiseEqual(outs[i], outs[0]), `${wire} N=${n} peer ${i}`).toBe(true);
        const err = worstError(outs[0], sum64(inputs), inputs);
        expect(err.rel).toBeLessThanOrEqual(bound[wire](n));
        expect(err.rel).toBeGreaterThan(2 ** -20); // it really went through half precision
        for (const r of rings) r.close();
      }
    });
  }
});
