// The outer step of rounds (src/optim/outer.ts) against a float64 reference on awkward sizes,
// its determinism, and the settings check.
import { describe, expect, it } from 'vitest';
import { OptimError } from '../../src/optim/errors.ts';
import { hostOptimizerStep } from '../../src/optim/host.ts';
import { parseOptimizerConfig } from '../../src/optim/config.ts';
import { carriedMomentum, checkOuterConfig, outerStep, weightedChange } from '../../src/optim/outer.ts';

function rand(n: number, seed: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return a;
}

/** Float64 reference: the images-weighted mean change of each peer, then Nesterov. */
function reference(
  w0: Float64Array, peers: { w: Float64Array; images: number }[], u: Float64Array, lr: number, mu: number,
): { w: Float64Array; u: Float64Array } {
  const n = w0.length, total = peers.reduce((a, p) => a + p.images, 0);
  const w = new Float64Array(n), u2 = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let d = 0;
    for (const p of peers) d += p.images * (w0[i]! - p.w[i]!);
    d /= total;
    u2[i] = mu * u[i]! + d;
    w[i] = w0[i]! - lr * (d + mu * u2[i]!);
  }
  return { w, u: u2 };
}

describe('outer step', () => {
  it.each([1, 7, 1031])('matches the float64 reference over 3 peers (n = %i)', (n) => {
    const cfg = { syncEvery: 8, lr: 0.7, momentum: 0.9, warmup: 0 };
    const w0 = rand(n, 1), u = rand(n, 2, 0.01);
    const peers = [3, 5, 0].map((images, k) => ({ w: Float32Array.from(w0, (x, i) => x - 0.01 * rand(n, 10 + k)[i]!), images }));
    const sum = new Float32Array(n);
    for (const p of peers) weightedChange(w0, p.w, p.images, new Float32Array(n)).forEach((v, i) => { sum[i] = Math.fround(sum[i]! + v); });
    const ref = reference(
      Float64Array.from(w0), peers.map((p) => ({ w: Float64Array.from(p.w), images: p.images })), Float64Array.from(u), cfg.lr, cfg.momentum,
    );
    const w = w0.slice(), uu = u.slice();
    outerStep(cfg, w, uu, sum, 8);
    for (let i = 0; i < n; i++) {
      expect(Math.abs(w[i]! - ref.w[i]!)).toBeLessThan(1e-6 * (1 + Math.abs(ref.w[i]!)));
      expect(Math.abs(uu[i]! - ref.u[i]!)).toBeLessThan(1e-6 * (1 + Math.abs(ref.u[i]!)));
    }
  });

  it('is deterministic to the bit, and with rate 1 and no momentum lands on the mean of the peers', () => {
    const n = 257, w0 = rand(n, 5), a = rand(n, 6), b = rand(n, 7);
    const sum = new Float32Array(n);
    const ca = weightedChange(w0, a, 2, new Float32Array(n)), cb = weightedChange(w0, b, 2, new Float32Array(n));
    for (let i = 0; i < n; i++) sum[i] = Math.fround(ca[i]! + cb[i]!);
    const run = () => { const w = w0.slice(), u = new Float32Array(n); outerStep({ syncEvery: 2, lr: 1, momentum: 0, warmup: 0 }, w, u, sum, 4); return w; };
    const w1 = run(), w2 = run();
    expect(Buffer.from(w1.buffer).equals(Buffer.from(w2.buffer))).toBe(true);
    for (let i = 0; i < n; i++) expect(w1[i]!).toBeCloseTo((a[i]! + b[i]!) / 2, 5);
  });

  it('refuses bad settings and inputs, saying what is allowed', () => {
    expect(() => checkOuterConfig({ syncEvery: 0, lr: 0.7, momentum: 0.9, warmup: 0 })).toThrow(/syncEvery must be an integer in \[1, 1024\]/);
    expect(() => checkOuterConfig({ syncEvery: 4, lr: 0, momentum: 0.9, warmup: 0 })).toThrow(/outer rate/);
    expect(() => checkOuterConfig({ syncEvery: 4, lr: 0.7, momentum: 1, warmup: 0 })).toThrow(OptimError);
    expect(() => outerStep(
      { syncEvery: 4, lr: 0.7, momentum: 0.9, warmup: 0 }, new Float32Array(2), new Float32Array(2), new Float32Array(2), 0,
    )).toThrow(/at least one image/);
    expect(() => weightedChange(new Float32Array(2), new Float32Array(3), 1, new Float32Array(2))).toThrow(/same length/);
  });
});

describe('carried inner momentum (momentumCarry)', () => {
  /** Float64 reference: rho (1 - m) / (m (1 - m^H)) times the mean change. */
  const reference = (sum: Float32Array, images: number, h: number, m: number, rho: number): Float64Array =>
    Float64Array.from(sum, (s) => ((rho * (1 - m)) / (m * (1 - m ** h))) * (s / images));

  it.each([
    [1, 1, 0.9, 0.75], [7, 8, 0.9, 0.75], [1031, 32, 0.9, 0.5], [13, 1024, 0.99, 0.9], [5, 3, 0.5, 0],
  ])('matches the float64 reference (n = %i, H = %i, m = %f, rho = %f)', (n, h, m, rho) => {
    const sum = rand(n, 3, 0.2), v = new Float32Array(n);
    carriedMomentum(v, sum, 96, h, m, rho);
    const ref = reference(sum, 96, h, m, rho);
    for (let i = 0; i < n; i++) expect(Math.abs(v[i]! - ref[i]!)).toBeLessThanOrEqual(1e-7 * Math.abs(ref[i]!) + 1e-30);
  });

  it('alone moves the weights by rho times the round\'s mean change over the next H steps (the inner optimiser with no gradient)', () => {
    const n = 33, h = 8, rho = 0.75;
    const sum = rand(n, 4, 0.5), images = 64, v = new Float32Array(n);
    carriedMomentum(v, sum, images, h, 0.9, rho);
    const w = new Float32Array(n), G = new Float32Array(n);
    const cfg = parseOptimizerConfig({ kind: 'sgd', lr: 0.1, momentum: 0.9, weightDecay: 0, schedule: 'constant', totalSteps: 100 });
    for (let t = 0; t < h; t++) hostOptimizerStep(cfg, [{ name: 'all', offset: 0, length: n, decay: false, adapt: false }], { w, v, G, t, gradScale: 1 });
    for (let i = 0; i < n; i++) expect(-w[i]!).toBeCloseTo((rho * sum[i]!) / images, 6);
  });

  it('gives the same bits on every call, zero without inner momentum, and refuses bad inputs', () => {
    const sum = rand(300, 9), a = new Float32Array(300), b = new Float32Array(300);
    carriedMomentum(a, sum, 10, 100, 0.9, 0.75);
    carriedMomentum(b, sum, 10, 100, 0.9, 0.75);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
    const z = rand(4, 1);
    carriedMomentum(z, rand(4, 2), 3, 8, 0, 0.75);
    expect([...z]).toEqual([0, 0, 0, 0]);
    const v = new Float32Array(2);
    expect(() => carriedMomentum(v, new Float32Array(3), 1, 8, 0.9, 0.75)).toThrow(/same length/);
    expect(() => carriedMomentum(v, new Float32Array(2), 0, 8, 0.9, 0.75)).toThrow(/at least one image/);
    expect(() => carriedMomentum(v, new Float32Array(2), 1, 0, 0.9, 0.75)).toThrow(/innerSteps/);
    expect(() => carriedMomentum(v, new Float32Array(2), 1, 8, 0.9, 1)).toThrow(/rho/);
    expect(() => checkOuterConfig({ syncEvery: 8, lr: 1, momentum: 0, warmup: 0, carry: 1 })).toThrow(/momentum carry must be a number in \[0, 1\)/);
    expect(() => checkOuterConfig({ syncEvery: 8, lr: 1, momentum: 0, warmup: 0, carry: Number.NaN })).toThrow(OptimError);
    expect(checkOuterConfig({ syncEvery: 8, lr: 1, momentum: 0, warmup: 0, carry: 0 }).carry).toBe(0);
  });
});
