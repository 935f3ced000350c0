// The frame sequence on each link of the ring all-reduce, checked exhaustively: ring sizes
// 2..64, awkward gradient lengths (0, 1, N-1, N, N+1, chunks of exactly one message, one over,
// one under, empty chunks, tens of thousands of floats), the message sizes in use and every
// wire format. The sender walks linkSchedule(rank + 1), the receiver linkSchedule(rank); both
// are compared with a reference written from the algorithm's description (plan.ts header), not
// from the code (N chunks, or one a frame when the buffer has fewer than N frames), and with
// plan.ts's segmentRange arithmetic. Then real rings
// over memory links on the suspicious cases, with N up to 64.
import { describe, expect, it } from 'vitest';
import { allReduceSum, frameRange, linkSchedule, locateFrame, type LinkStep } from '../../src/comm/allreduce.ts';
import { memoryRing } from '../../src/comm/index.ts';
import { segmentRange } from '../../src/comm/plan.ts';
import { BYTES_PER_ELEMENT, HEADER_BYTES, MAX_FRAME_BYTES, Phase, type WireFormat } from '../../src/protocol/frames.ts';
import { bitwiseEqual, randomGrad, ringCut, sum64, worstError } from './helpers.ts';

const WIRES: readonly WireFormat[] = ['f32', 'f16', 'bf16'];
/** The volunteer's default (64 KiB), the largest frame, the sizes of the other ring tests, the smallest. */
const MESSAGE_BYTES = [64 << 10, MAX_FRAME_BYTES, 4096, HEADER_BYTES + 4 * 1000, HEADER_BYTES + 4 * 500, HEADER_BYTES + 4 * 97, HEADER_BYTES + 4];
const segElemsOf = (messageBytes: number, wire: WireFormat): number => Math.floor((messageBytes - HEADER_BYTES) / BYTES_PER_ELEMENT[wire]);
const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** Lengths that stress the chunk and segment arithmetic for a ring of n and frames of s elements. */
function lengthsFor(n: number, s: number): number[] {
  const around = (x: number) => [x - 1, x, x + 1];
  const ls = [
    0, 1, n - 1, n, n + 1, 2 * n - 1, 7 * n + 3, ...around(n * s), n * s + n - 1, (n - 1) * s + 1, ...around(2 * n * s), 12_345, 30_000, 30_000 + n - 1, 65_536,
  ];
  return [...new Set(ls.filter((l) => l >= 0 && l < 2 ** 24))];
}

/** The chunk rank r receives at ring step t, from the description: reduce-scatter k = t gets r-k-1, all-gather k = t-N+1 gets r-k. */
const recvChunk = (r: number, t: number, n: number): number => (t < n - 1 ? mod(r - t - 1, n) : mod(r - (t - n + 1), n));
/** The chunk rank s sends at ring step t: reduce-scatter s-k, all-gather s+1-k. */
const sendChunk = (s: number, t: number, n: number): number => (t < n - 1 ? mod(s - t, n) : mod(s + 1 - (t - n + 1), n));

describe('linkSchedule: sender and receiver agree on every frame', () => {
  // Every rank up to N=16; above, the ranks at the ends, the middle and 38..40 (the churn run's
  // blame): each rank's schedule walks every chunk, so all chunk boundaries are checked anyway.
  const ranksOf = (n: number): number[] => (n <= 16 ? Array.from({ length: n }, (_, r) => r)
    : [...new Set([0, 1, 2, n >> 1, n - 3, n - 2, n - 1, 38, 39, 40].filter((r) => r < n))]);

  it('ring sizes 2..64 x awkward lengths x message sizes x wires', () => {
    const segs = [...new Set(MESSAGE_BYTES.flatMap((mb) => WIRES.map((w) => segElemsOf(mb, w))))];
    let checked = 0;
    for (let n = 2; n <= 64; n++) {
      for (const s of segs) {
        for (const length of lengthsFor(n, s)) {
          const what = `N=${n} length=${length} segElems=${s}`;
          // Each rank's view: the frames into it. The sender of rank n-1 asks for rank n.
          const scheds = new Map<number, LinkStep[]>();
          const sched = (r: number): LinkStep[] => {
            let v = scheds.get(r);
            if (!v) scheds.set(r, (v = linkSchedule(r, length, n, s)));
            return v;
          };
          if (JSON.stringify(linkSchedule(n, length, n, s)) !== JSON.stringify(sched(0))) expect.fail(
            `${what}: the sender of rank ${n - 1} sees another schedule`,
          );
          for (const r of ranksOf(n)) {
            const recv = sched(r);
            const sendOfSelf = sched((r + 1) % n);
            if (recv.length !== 2 * n - 2) expect.fail(`${what} rank ${r}: ${recv.length} ring steps`);
            for (let t = 0; t < 2 * n - 2; t++) {
              const st = recv[t];
              const c = recvChunk(r, t, n);
              const [start, end] = ringCut(c, length, n, s);
              const ok =
                st.phase === (t < n - 1 ? Phase.reduceScatter : Phase.allGather) &&
                // what prev sends at step t (from the description) is what this peer expects
                st.chunk === c && sendChunk(mod(r - 1, n), t, n) === c &&
                st.start === start && st.end === end &&
                st.segments === Math.ceil((end - start) / s) &&
                // step t+1 forwards the chunk received at step t (the pipeline's dependency)
                (t === 2 * n - 3 || (sendOfSelf[t + 1].chunk === c && sendOfSelf[t + 1].segments === st.segments));
              if (!ok) expect.fail(`${what} rank ${r} step ${t}: ${JSON.stringify(st)} vs chunk ${c} [${start}, ${end})`);
              checked++;
              if (st.segments === 0) continue;
              // The frames tile the chunk: full frames, then a last one of 1..s elements, as the
              // wire carried them before (plan.ts segmentRange).
              for (const j of [0, st.segments - 1]) {
                const [off, len] = frameRange(st, j, s);
                const [oldOff, oldLen] = segmentRange(c, j, length, n, s);
                if (off !== oldOff || len !== oldLen) expect.fail(
                  `${what} rank ${r} step ${t} segment ${j}: [${off}, +${len}) vs segmentRange [${oldOff}, +${oldLen})`,
                );
                if (j === st.segments - 1 && (off + len !== end || len < 1 || len > s)) expect.fail(
                  `${what} rank ${r} step ${t}: last frame [${off}, +${len}) does not end chunk ${c} at ${end}`,
                );
              }
            }
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(500_000);
  });

  it('locateFrame finds every frame of a schedule at its own step and segment, and nothing else', () => {
    for (const [n, length, s] of [[5, 103, 7], [41, 30_000, 16_376], [50, 50 * 7 + 1, 7], [3, 2, 1]] as const) {
      const sched = linkSchedule(1, length, n, s);
      sched.forEach((st, t) => {
        for (let j = 0; j < st.segments; j++) {
          const [offset, len] = frameRange(st, j, s);
          const at = locateFrame(sched, { phase: st.phase, chunk: st.chunk, offset, length: len }, s);
          // An all-gather step may carry the same chunk as a reduce-scatter step; phase tells them apart.
          expect(at, `N=${n} L=${length} t=${t} j=${j}`).toEqual([t, j]);
        }
      });
      expect(locateFrame(sched, { phase: Phase.reduceScatter, chunk: sched[0].chunk, offset: sched[0].start + 1, length: 1 }, s)).toBeNull();
    }
  });
});

describe('allReduceSum on the suspicious cases, memory rings up to N=64', () => {
  // float32 adds (N terms) and, on half wires, one rounding per hop (half-wire.test.ts).
  const bound = (wire: WireFormat, n: number): number => (wire === 'f32' ? 2 * n * 2 ** -24 : wire === 'f16' ? n * 2 ** -11 : n * 2 ** -8);

  async function check(n: number, length: number, wire: WireFormat, messageBytes: number): Promise<void> {
    const ids = Array.from({ length: n }, (_, i) => `q${i}`);
    const { rings } = memoryRing(ids);
    try {
      const inputs = ids.map((_, i) => randomGrad(length, 31 * n + i + length));
      const outs = inputs.map((g) => g.slice());
      const settled = await Promise.allSettled(rings.map((ring, i) => allReduceSum(outs[i], { ring, step: 0, wire, messageBytes })));
      const what = `N=${n} length=${length} ${wire} messageBytes=${messageBytes}`;
      settled.forEach((s, i) => { if (s.status === 'rejected') expect.fail(`${what}: peer ${i}: ${(s.reason as Error).message}`); });
      for (let i = 1; i < n; i++) if (!bitwiseEqual(outs[i], outs[0])) expect.fail(`${what}: peer ${i} differs from peer 0`);
      const err = worstError(outs[0], sum64(inputs), inputs);
      expect(err.rel, `${what}: worst at ${err.index}`).toBeLessThanOrEqual(bound(wire, n));
    } finally {
      for (const r of rings) r.close();
    }
  }

  for (const n of [2, 3, 40, 41, 50, 64]) {
    it(`N=${n}: 0, 1, N-1, N, N+1 floats; chunks of one message, one over, one under; every wire`, async () => {
      const s = 7; // elements per frame on every wire: small rings of many frames
      for (const wire of WIRES) {
        const messageBytes = HEADER_BYTES + s * BYTES_PER_ELEMENT[wire];
        for (const length of [0, 1, n - 1, n, n + 1, n * s - 1, n * s, n * s + 1, (n - 1) * s + 1]) await check(n, length, wire, messageBytes);
      }
    });
  }

  it('N=50 (the churn run): 30,000 and 30,049 floats, default 64 KiB frames, every wire', async () => {
    for (const wire of WIRES) for (const length of [30_000, 30_049]) await check(50, length, wire, 64 << 10);
  });
});
