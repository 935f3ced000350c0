// The int8 wire (src/protocol/codec.ts): power-of-two scales, exact decoding and re-encoding, the
// error feedback that keeps what the wire drops; and the ring (flat and two-level) on it: every
// peer ends with the same bits, the error stays within its bound, and what one step's sum lost
// is exactly what the peers' feedback buffers hold, so over many steps nothing is lost.
import { describe, expect, it } from 'vitest';
import { allReduceSum, allReduceTwoLevel, memoryRing, memoryTwoLevel, planTopology } from '../../src/comm/index.ts';
import { decodePayload, encodePayload, inspectPayload, int8Scale, payloadBytes } from '../../src/protocol/codec.ts';
import { FrameKind, HEADER_BYTES, Phase, dataFrame, parseFrame } from '../../src/protocol/frames.ts';
import { bitwiseEqual, randomGrad, sum64 } from './helpers.ts';

const encode = (x: Float32Array, feedback?: Float32Array): Uint8Array => {
  const out = new Uint8Array(payloadBytes('i8', x.length));
  encodePayload(x, out, 'i8', { keepRounded: false, ...(feedback ? { feedback } : {}) });
  return out;
};
const decode = (p: Uint8Array, len: number): Float32Array => {
  const d = new Float32Array(len);
  decodePayload(p, d, 'i8', 'set');
  return d;
};
/** Values of very different magnitudes: a gradient's spread, zeros and extremes. */
const spread = (len: number, seed: number, mag: number): Float32Array => randomGrad(len, seed).map((v, i) => (i % 17 === 0 ? 0 : v * mag * 2 ** ((i % 9) - 4)));

describe('int8 codec', () => {
  it('the scale is the smallest power of two s with max|x| <= 127 s', () => {
    for (const m of [1e-30, 3e-9, 0.01, 0.5, 1, 126.9, 127, 127.0001, 254, 1e6, 3e38]) {
      const s = int8Scale(m);
      expect(Math.log2(s), `${m}`).toBe(Math.round(Math.log2(s)));
      expect(m, `${m} fits`).toBeLessThanOrEqual(127 * s);
      expect(m, `${m}: no smaller scale fits`).toBeGreaterThan(127 * s / 2);
    }
    expect(int8Scale(127)).toBe(1);
    expect(int8Scale(127.0001)).toBe(2);
    expect(int8Scale(0)).toBe(2 ** -133);
    expect(int8Scale(Number.NaN)).toBeNaN();
    expect(int8Scale(Number.POSITIVE_INFINITY)).toBeNaN();
  });

  it('each value decodes within half a scale step; decoded values encode to the same bytes', () => {
    for (const [len, mag] of [[1, 1], [7, 1e-3], [1000, 5], [4099, 1e4], [300, 1e-36]] as const) {
      const x = spread(len, len, mag);
      const p = encode(x);
      const s = new DataView(p.buffer).getFloat32(0, true);
      const d = decode(p, len);
      for (let i = 0; i < len; i++) expect(Math.abs(d[i]! - x[i]!), `len ${len} element ${i}`).toBeLessThanOrEqual(s / 2);
      // The all-gather passes on what it received: the same bytes, so every peer gets the same bits.
      expect(Buffer.from(encode(d)).equals(Buffer.from(p)), `len ${len}: re-encoding is exact`).toBe(true);
      expect(bitwiseEqual(decode(encode(d), len), d)).toBe(true);
    }
  });

  it('error feedback adds exactly what the wire dropped; keepRounded leaves the decoded values', () => {
    const x = spread(2000, 3, 2);
    const fb = randomGrad(2000, 4).map((v) => v * 1e-3);
    const before = fb.slice();
    const p = encode(x, fb);
    const d = decode(p, x.length);
    for (let i = 0; i < x.length; i++) expect(fb[i]).toBe(Math.fround(before[i]! + Math.fround(x[i]! - d[i]!)));
    const y = x.slice();
    encodePayload(y, new Uint8Array(payloadBytes('i8', y.length)), 'i8', { keepRounded: true });
    expect(bitwiseEqual(y, d)).toBe(true);
  });

  it('a receiver refuses a NaN gradient, a scale that is no power of two and a frame of the wrong size', () => {
    const x = new Float32Array([1, 2, Number.NaN, 4]);
    expect(inspectPayload(encode(x), 'i8', 4, true).bad).toBe(0);
    const p = encode(new Float32Array([1, -2, 3, 100]));
    expect(inspectPayload(p, 'i8', 4, true)).toEqual({ bad: -1, rms: expect.any(Number) as number });
    const rms = Math.sqrt((1 + 4 + 9 + 100 * 100) / 4);
    expect(inspectPayload(p, 'i8', 4, true).rms).toBeCloseTo(rms, 0);
    new DataView(p.buffer).setFloat32(0, 0.3, true);
    expect(inspectPayload(p, 'i8', 4, true).bad).toBe(0);
    new DataView(p.buffer).setFloat32(0, Number.POSITIVE_INFINITY, true);
    expect(inspectPayload(p, 'i8', 4, false).bad).toBe(0);
    const frame = dataFrame({ job: 1, generation: 1 }, { phase: Phase.reduceScatter, dtype: 'i8', step: 0, chunk: 0, offset: 0 }, new Float32Array(10), false);
    expect(frame.byteLength).toBe(HEADER_BYTES + 4 + 10);
    expect(parseFrame(frame)).toMatchObject({ ok: true, header: { kind: FrameKind.data, dtype: 'i8', length: 10 } });
    expect(parseFrame(frame.subarray(0, frame.byteLength - 1))).toMatchObject({ ok: false, reason: expect.stringMatching(/truncated frame/) as string });
  });
});

/** max over elements of sum_i |x_i|: bounds every partial sum, so every frame's largest value. */
const maxAbsSum = (inputs: readonly Float32Array[]): number => {
  let m = 0;
  for (let j = 0; j < inputs[0]!.length; j++) m = Math.max(m, inputs.reduce((a, g) => a + Math.abs(g[j]!), 0));
  return m;
};

describe('ring all-reduce on the int8 wire', () => {
  it('N=2..5: bitwise equal on all peers, within N roundings of the largest partial sum, and the feedback holds exactly what was lost', async () => {
    for (let n = 2; n <= 5; n++) {
      const ids = Array.from({ length: n }, (_, i) => `q${i}`);
      const { rings } = memoryRing(ids);
      const inputs = ids.map((_, i) => spread(30_011, 90 + i, 1));
      const outs = inputs.map((g) => g.slice());
      const fbs = inputs.map((g) => new Float32Array(g.length));
      await Promise.all(rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: 0, wire: 'i8', messageBytes: 4096, feedback: fbs[i]! })));
      for (let i = 1; i < n; i++) expect(bitwiseEqual(outs[i]!, outs[0]!), `N=${n} peer ${i}`).toBe(true);
      const want = sum64(inputs);
      const m = maxAbsSum(inputs);
      let worst = 0, lost = 0;
      for (let j = 0; j < want.length; j++) {
        worst = Math.max(worst, Math.abs(outs[0]![j]! - want[j]!));
        // What the sum lacks is what the peers keep, to float32 rounding of a few adds.
        const kept = fbs.reduce((a, f) => a + f[j]!, 0);
        lost = Math.max(lost, Math.abs(want[j]! - outs[0]![j]! - kept));
      }
      expect(worst, `N=${n}`).toBeLessThanOrEqual((n * m) / 127);
      expect(worst, `N=${n}: it really went through int8`).toBeGreaterThan(1e-4 * m);
      expect(lost, `N=${n}: sum + feedback = the exact sum`).toBeLessThanOrEqual(4 * n * m * 2 ** -24);
      for (const r of rings) r.close();
    }
  });

  it('over 30 steps of the same gradients the error stays one step\'s with feedback, and grows without it', async () => {
    const n = 4, len = 5003, steps = 30;
    const ids = Array.from({ length: n }, (_, i) => `s${i}`);
    const inputs = ids.map((_, i) => spread(len, 200 + i, 1));
    const want = sum64(inputs);
    const drift = async (withFeedback: boolean): Promise<number> => {
      const { rings } = memoryRing(ids);
      const total = new Float64Array(len);
      let fbs = inputs.map(() => new Float32Array(len));
      for (let t = 0; t < steps; t++) {
        // Each peer adds what its last step dropped into this step's contribution.
        const outs = inputs.map((g, i) => (withFeedback ? g.map((v, j) => v + fbs[i]![j]!) : g.slice()));
        const fresh = inputs.map(() => new Float32Array(len));
        const fb = (i: number) => (withFeedback ? { feedback: fresh[i]! } : {});
        await Promise.all(rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: t, wire: 'i8', messageBytes: 2048, ...fb(i) })));
        fbs = fresh;
        for (let j = 0; j < len; j++) total[j] = total[j]! + outs[0]![j]!;
      }
      for (const r of rings) r.close();
      let worst = 0;
      for (let j = 0; j < len; j++) worst = Math.max(worst, Math.abs(total[j]! - steps * want[j]!));
      return worst;
    };
    const m = maxAbsSum(inputs);
    const [kept, dropped] = [await drift(true), await drift(false)];
    expect(kept, 'with feedback: about one step\'s error, whatever the number of steps').toBeLessThanOrEqual((2 * n * m) / 127);
    expect(dropped, 'without: the same rounding every step adds up').toBeGreaterThan(5 * kept);
  });

  it('two levels (9 peers in 3 groups): bitwise equal, and sum + feedback = the exact sum', async () => {
    const topology = planTopology(Array.from({ length: 9 }, (_, i) => ({ id: `t${i}`, bandwidth: 1e6 * (i + 1) })), { groups: 3 });
    const { peers } = memoryTwoLevel(topology);
    const order = [...peers.keys()];
    const inputs = order.map((_, i) => spread(4099, 300 + i, 3));
    const outs = inputs.map((g) => g.slice());
    const fbs = inputs.map((g) => new Float32Array(g.length));
    const options = (id: string, i: number) => ({ rings: peers.get(id)!, step: 0, wire: 'i8' as const, messageBytes: 32 + 4 + 500, feedback: fbs[i]! });
    await Promise.all(order.map((id, i) => allReduceTwoLevel(outs[i]!, options(id, i))));
    for (let i = 1; i < outs.length; i++) expect(bitwiseEqual(outs[i]!, outs[0]!), `peer ${order[i]}`).toBe(true);
    const want = sum64(inputs);
    const m = maxAbsSum(inputs);
    let lost = 0;
    for (let j = 0; j < want.length; j++) lost = Math.max(lost, Math.abs(want[j]! - outs[0]![j]! - fbs.reduce((a, f) => a + f[j]!, 0)));
    expect(lost).toBeLessThanOrEqual(4 * 9 * m * 2 ** -24);
    for (const p of peers.values()) p.close();
  });
});
