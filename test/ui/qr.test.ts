// The dashboard's QR code, checked by reading it back with a decoder written here from the
// standard (ISO/IEC 18004), independent of the library that draws it: finder and timing
// patterns, the format information (its BCH code, level M), the data codewords (byte mode,
// the exact text) and the Reed-Solomon check codewords of every block. Versions 1-6 only
// (one alignment pattern, no version information): every address up to about 100 characters.
import { describe, expect, it } from 'vitest';
import { QR_MAX_BYTES, qrMatrix, qrSvg } from '../../src/ui/join.ts';

// Version -> [blocks, data codewords per block, check codewords per block] at level M.
const M_BLOCKS: Record<number, [number, number, number]> = { 1: [1, 16, 10], 2: [1, 28, 16], 3: [1, 44, 26], 4: [2, 32, 18], 5: [2, 43, 24], 6: [4, 27, 16] };
const MASKS: ((i: number, j: number) => boolean)[] = [
  (i, j) => (i + j) % 2 === 0,
  (i) => i % 2 === 0,
  (_i, j) => j % 3 === 0,
  (i, j) => (i + j) % 3 === 0,
  (i, j) => (Math.floor(i / 2) + Math.floor(j / 3)) % 2 === 0,
  (i, j) => ((i * j) % 2) + ((i * j) % 3) === 0,
  (i, j) => (((i * j) % 2) + ((i * j) % 3)) % 2 === 0,
  (i, j) => (((i + j) % 2) + ((i * j) % 3)) % 2 === 0,
];

/** The 15 format bits of the copy around the top-left finder, bit 14 first. */
function formatBits(q: boolean[][]): number {
  const cells: [number, number][] = [[8, 0], [8, 1], [8, 2], [8, 3], [8, 4], [8, 5], [8, 7], [8, 8], [7, 8], [5, 8], [4, 8], [3, 8], [2, 8], [1, 8], [0, 8]];
  return cells.reduce((v, [r, c]) => (v << 1) | (q[r]![c] ? 1 : 0), 0);
}
/** The second copy: column 8 from the bottom (bits 14..8), then row 8 on the right (bits 7..0). */
function formatBits2(q: boolean[][]): number {
  const n = q.length;
  const cells: [number, number][] = [];
  for (let k = 0; k < 7; k++) cells.push([n - 1 - k, 8]);
  for (let k = 0; k < 8; k++) cells.push([8, n - 8 + k]);
  return cells.reduce((v, [r, c]) => (v << 1) | (q[r]![c] ? 1 : 0), 0);
}
const bchRemainder = (data5: number): number => {
  let v = data5 << 10;
  for (let b = 14; b >= 10; b--) if (v & (1 << b)) v ^= 0x537 << (b - 10);
  return v;
};

function isFunction(n: number, r: number, c: number, version: number): boolean {
  if ((r < 9 && c < 9) || (r < 9 && c >= n - 8) || (r >= n - 8 && c < 9)) return true; // finders, separators, format
  if (r === 6 || c === 6) return true; // timing
  if (version >= 2 && Math.abs(r - (n - 7)) <= 2 && Math.abs(c - (n - 7)) <= 2) return true; // the one alignment pattern
  return false;
}

/** Data and check codewords in placement order (the zigzag from the bottom-right corner). */
function codewords(q: boolean[][], version: number, mask: number): number[] {
  const n = q.length;
  const bits: number[] = [];
  let up = true;
  for (let col = n - 1; col > 0; col -= 2) {
    if (col === 6) col--;
    for (let k = 0; k < n; k++) {
      const r = up ? n - 1 - k : k;
      for (const c of [col, col - 1]) {
        if (isFunction(n, r, c, version)) continue;
        bits.push((q[r]![c] !== MASKS[mask]!(r, c)) ? 1 : 0);
      }
    }
    up = !up;
  }
  const out: number[] = [];
  for (let i = 0; i + 8 <= bits.length; i += 8) out.push(bits.slice(i, i + 8).reduce((v, b) => (v << 1) | b, 0));
  return out;
}

// GF(256) with the QR polynomial x^8 + x^4 + x^3 + x^2 + 1.
const EXP: number[] = [], LOG: number[] = [];
for (let i = 0, x = 1; i < 255; i++) { EXP[i] = x; LOG[x] = i; x = (x << 1) ^ (x & 0x80 ? 0x11d : 0); }
const mul = (a: number, b: number) => (a && b ? EXP[(LOG[a]! + LOG[b]!) % 255]! : 0);
/** The `k` Reed-Solomon check codewords of `data` (generator prod (x - 2^i), i < k). */
function rsCheck(data: number[], k: number): number[] {
  let g = [1];
  for (let i = 0; i < k; i++) g = [...g, 0].map((c, j) => c ^ (j > 0 ? mul(g[j - 1]!, EXP[i]!) : 0));
  const rem = [...data, ...new Array<number>(k).fill(0)];
  for (let i = 0; i < data.length; i++) {
    const f = rem[i]!;
    if (f) for (let j = 0; j < g.length; j++) rem[i + j]! ^= mul(g[j]!, f);
  }
  return rem.slice(data.length);
}

/** Reads a QR code of versions 1-6 at level M back to its text, checking everything on the way. */
function decode(q: boolean[][]): string {
  const n = q.length;
  const version = (n - 17) / 4;
  const [blocks, perBlock, check] = M_BLOCKS[version] ?? [0, 0, 0];
  if (!blocks) throw new Error(`version ${version} is outside this test decoder`);
  // Finder patterns: dark 7x7 ring, light ring, dark 3x3 core; light separators.
  for (const [r0, c0] of [[0, 0], [0, n - 7], [n - 7, 0]] as const) {
    for (let r = -1; r <= 7; r++) for (let c = -1; c <= 7; c++) {
      const rr = r0 + r, cc = c0 + c;
      if (rr < 0 || cc < 0 || rr >= n || cc >= n) continue;
      const ring = Math.max(Math.abs(r - 3), Math.abs(c - 3));
      expect(q[rr]![cc], `finder at ${r0},${c0}: module ${rr},${cc}`).toBe(ring === 3 || ring <= 1);
    }
  }
  for (let k = 8; k < n - 8; k++) {
    expect(q[6]![k], `timing row ${k}`).toBe(k % 2 === 0);
    expect(q[k]![6], `timing column ${k}`).toBe(k % 2 === 0);
  }
  expect(q[n - 8]![8], 'the dark module').toBe(true);
  const f = formatBits(q);
  expect(formatBits2(q), 'both format copies agree').toBe(f);
  const fmt = f ^ 0x5412;
  expect(bchRemainder(fmt >> 10), 'format BCH').toBe(fmt & 0x3ff);
  expect(fmt >> 13, 'error correction level M').toBe(0);
  // Blocks are interleaved: word k of block 0, of block 1, ..., then word k + 1; checks after.
  const words = codewords(q, version, (fmt >> 10) & 7);
  const dataWords = blocks * perBlock;
  const blockData = (b: number) => Array.from({ length: perBlock }, (_, k) => words[k * blocks + b]!);
  const blockCheck = (b: number) => Array.from({ length: check }, (_, k) => words[dataWords + k * blocks + b]!);
  for (let b = 0; b < blocks; b++) expect(blockCheck(b), `Reed-Solomon check codewords of block ${b}`).toEqual(rsCheck(blockData(b), check));
  const data = Array.from({ length: blocks }, (_, b) => blockData(b)).flat();
  // Byte mode: 0100, an 8-bit count, the bytes, then a terminator and 0xEC/0x11 padding.
  const bits = data.flatMap((w) => Array.from({ length: 8 }, (_, i) => (w >> (7 - i)) & 1));
  const read = (at: number, len: number) => bits.slice(at, at + len).reduce((v, b) => (v << 1) | b, 0);
  expect(read(0, 4), 'byte mode').toBe(0b0100);
  const count = read(4, 8);
  return String.fromCharCode(...Array.from({ length: count }, (_, i) => read(12 + 8 * i, 8)));
}

describe('the QR code of the join address', () => {
  const versions = new Set<number>();
  it.each([
    'https://10.77.0.1:8080/',
    'https://lab-pc.local:8080/?token=Zq3xK9-7hY',
    'http://127.0.0.1:8080/',
    'https://[fd00::1]:8080/?token=a%20b',
    `https://lab-pc.local:8080/?token=${'Zq3xK9-7hY_'.repeat(4)}`,
    `https://volunteer-lab-desktop-07.local:8080/?token=${'Zq3xK9-7hY_'.repeat(5)}`,
  ])('reads back as %s', (url) => {
    const q = qrMatrix(url);
    expect(q.length).toBeGreaterThanOrEqual(21);
    expect(decode(q)).toBe(url);
    versions.add((q.length - 17) / 4);
  });
  it('those cover single- and multi-block versions', () => expect([...versions].sort()).toEqual([2, 3, 4, 5, 6]));

  it('uses version 2 (25 modules) for a typical LAN address', () => {
    expect(qrMatrix('https://10.77.0.1:8080/').length).toBe(25);
  });

  it('the decoder itself rejects a damaged code (it cannot pass vacuously)', () => {
    const q = qrMatrix('https://10.77.0.1:8080/');
    const bad = q.map((row) => [...row]);
    bad[12]![14] = !bad[12]![14]; // one data module
    expect(() => decode(bad)).toThrow();
    const badFormat = q.map((row) => [...row]);
    badFormat[8]![2] = !badFormat[8]![2];
    expect(() => decode(badFormat)).toThrow();
  });

  it('draws the matrix in the SVG with a 4-module quiet zone', () => {
    const url = 'https://10.77.0.1:8080/';
    const q = qrMatrix(url);
    const n = q.length, size = 290, cell = size / (n + 8);
    const svg = qrSvg(url, size);
    const dark = [...svg.matchAll(/M([\d.]+) ([\d.]+)h/g)].map((m) => `${Math.round(Number(m[1]) / cell) - 4},${Math.round(Number(m[2]) / cell) - 4}`);
    const want = q.flatMap((row, r) => row.flatMap((d, c) => (d ? [`${c},${r}`] : [])));
    expect(dark).toEqual(want);
  });

  it('an address too long for any QR code is said, not thrown', () => {
    expect(qrSvg(`https://x/${'a'.repeat(QR_MAX_BYTES)}`)).toContain('too long for a QR code');
    expect(() => qrSvg(`https://x/${'a'.repeat(QR_MAX_BYTES - 10)}`)).not.toThrow();
  });
});
