// Faults over memory links: a peer closing in reduce-scatter and in all-gather, a peer that
// vanishes silently (heartbeats), a stale frame, a truncated frame. Each must end the
// collective on every other peer with a RingError naming the right peer, within a bounded
// time, and leave no corrupted result (keepInput restores the input). A frame of another
// generation is the exception: dropped, blaming nobody (see abandoned-generation.test.ts).
import { describe, expect, it } from 'vitest';
import { RingError, allReduceSum, memoryRing, type RingSettings } from '../../src/comm/index.ts';
import { HEADER_BYTES, Phase, writeHeader, parseFrame, FrameKind } from '../../src/protocol/frames.ts';
import { bitwiseEqual, randomGrad } from './helpers.ts';

const IDS = ['p0', 'p1', 'p2', 'p3'];
const LEN = 200_000;
const MSG = 32 + 4 * 1000; // 1000 floats a message: 50 per chunk, many chances to interrupt

type Fault = (ctx: { rings: ReturnType<typeof memoryRing> }) => void;

/**
 * Runs one step on a 4-ring; when peer 1 has received `after` frames of `phase`, applies
 * `fault`. Returns each peer's outcome and input/output buffers.
 */
async function runWithFault(phase: Phase, after: number, fault: Fault, settings: Partial<RingSettings> = {}) {
  const mr = memoryRing(IDS, { settings });
  const inputs = IDS.map((_, i) => randomGrad(LEN, i + 1));
  const outs = inputs.map((g) => g.slice());
  let seen = 0;
  let fired = false;
  mr.fromPrev[1].onReceive = (f) => {
    const p = parseFrame(f);
    if (fired || !p.ok || p.header.kind !== FrameKind.data || p.header.phase !== phase) return;
    if (++seen === after) {
      fired = true;
      fault({ rings: mr });
    }
  };
  const t0 = Date.now();
  const settled = await Promise.allSettled(
    mr.rings.map((ring, i) => allReduceSum(outs[i], { ring, step: 3, messageBytes: MSG, keepInput: true }).then(() => Date.now() - t0)),
  );
  const ms = Date.now() - t0;
  for (const r of mr.rings) r.close();
  expect(fired, 'the fault was injected').toBe(true);
  return { settled, inputs, outs, ms };
}

function expectAllFailed(res: Awaited<ReturnType<typeof runWithFault>>, peers: number[], blamed: string, kinds: string[]) {
  for (const i of peers) {
    const s = res.settled[i];
    expect(s.status, `peer ${i} must fail`).toBe('rejected');
    if (s.status !== 'rejected') continue;
    const e: unknown = s.reason;
    expect(e).toBeInstanceOf(RingError);
    if (!(e instanceof RingError)) continue;
    expect(e.peerId, e.message).toBe(blamed);
    expect(kinds).toContain(e.kind === 'aborted' ? e.origin : e.kind);
    expect(bitwiseEqual(res.outs[i], res.inputs[i]), `peer ${i}: input restored, nothing half-reduced`).toBe(true);
  }
}

function dataFrame(
  h: { step: number; generation?: number; phase?: Phase; chunk?: number; offset?: number; length: number }, payloadFloats: number,
): Uint8Array {
  const f = new Uint8Array(HEADER_BYTES + 4 * payloadFloats);
  writeHeader(f, {
    kind: FrameKind.data, phase: h.phase ?? Phase.reduceScatter, dtype: 'f32', job: 1, generation: h.generation ?? 1, step: h.step, chunk: h.chunk ?? 0,
    offset: h.offset ?? 0, length: h.length,
  });
  new Float32Array(f.buffer, HEADER_BYTES).fill(1e30); // would be glaring if it were ever added
  return f;
}

describe('ring faults (memory links)', () => {
  it('a peer closing in the middle of reduce-scatter fails every other peer, naming it', async () => {
    const res = await runWithFault(Phase.reduceScatter, 20, ({ rings }) => rings.rings[2].close());
    expectAllFailed(res, [0, 1, 3], 'p2', ['peer-closed']);
  });

  it('a peer closing in the middle of all-gather fails every other peer, naming it', async () => {
    const res = await runWithFault(Phase.allGather, 60, ({ rings }) => rings.rings[3].close());
    expectAllFailed(res, [0, 1, 2], 'p3', ['peer-closed']);
  });

  it('a peer that vanishes without a word is noticed by heartbeats within deadAfterMs', async () => {
    const settings = { heartbeatMs: 100, deadAfterMs: 600 };
    const res = await runWithFault(Phase.reduceScatter, 10, ({ rings }) => {
      rings.toNext[2].vanish();
      rings.fromPrev[2].vanish();
    }, settings);
    expectAllFailed(res, [0, 1, 3], 'p2', ['peer-timeout']);
    expect(res.ms).toBeLessThan(3000);
  });

  it('in a collective the coordinator\'s dead time (setActiveDeadMs) replaces a long deadAfterMs; idle, only deadAfterMs counts', async () => {
    // deadAfterMs as long as volunteers have it (scaled down): a vanished peer would go unnoticed for the whole test.
    const settings = { heartbeatMs: 100, deadAfterMs: 60_000 };
    const mr = memoryRing(IDS, { settings });
    try {
      // Idle: p2 silent for 1.2 s before anyone begins, which the active dead time (600 ms) must not count.
      mr.toNext[2].vanish();
      mr.fromPrev[2].vanish();
      for (const r of mr.rings) r.setActiveDeadMs(600);
      await new Promise((r) => setTimeout(r, 1200));
      const inputs = IDS.map((_, i) => randomGrad(4000, i + 1));
      const t0 = Date.now();
      const others = [0, 1, 3].map((i) => allReduceSum(inputs[i]!.slice(), { ring: mr.rings[i]!, step: 3, keepInput: true }).then(
        () => ({ ok: true as const }), (e: unknown) => ({ ok: false as const, e, ms: Date.now() - t0 }),
      ));
      const res = await Promise.all(others);
      for (const r of res) {
        expect(r.ok, 'every other peer fails').toBe(false);
        if (r.ok) continue;
        expect(r.e).toBeInstanceOf(RingError);
        expect((r.e as RingError).peerId).toBe('p2');
        // Counted from the collective's start, not from when p2 fell silent (that would fail at once), and far under deadAfterMs.
        expect(r.ms).toBeGreaterThan(500);
        expect(r.ms).toBeLessThan(3000);
      }
    } finally {
      for (const r of mr.rings) r.close();
    }
  });

  it('a stale frame (previous step) mid-collective is refused, not added', async () => {
    const res = await runWithFault(Phase.reduceScatter, 5, ({ rings }) => rings.toNext[0].send(dataFrame({ step: 2, length: 10 }, 10)));
    expectAllFailed(res, [0, 1, 2, 3], 'p0', ['stale']);
    const e = (res.settled[1] as PromiseRejectedResult).reason as RingError;
    expect(e.kind).toBe('stale');
  });

  it('a frame from another generation (an abandoned attempt) is dropped, not blamed or added', async () => {
    const res = await runWithFault(Phase.allGather, 3, ({ rings }) => rings.toNext[0].send(dataFrame({ step: 3, generation: 0, length: 10 }, 10)));
    res.settled.forEach((s, i) => expect(s.status, `peer ${i}`).toBe('fulfilled'));
    for (let i = 1; i < 4; i++) expect(bitwiseEqual(res.outs[i], res.outs[0]), `peer ${i}`).toBe(true);
    expect(res.outs[0].every((v) => Math.abs(v) < 10), 'the 1e30 payload was not added').toBe(true);
  });

  it('a truncated frame and a frame of the wrong length are refused', async () => {
    const truncated = await runWithFault(
      Phase.reduceScatter, 7, ({ rings }) => rings.toNext[0].send(dataFrame({ step: 3, length: 1000 }, 999).subarray(0, HEADER_BYTES + 3990)),
    );
    expectAllFailed(truncated, [0, 1, 2, 3], 'p0', ['bad-frame']);
    expect(((truncated.settled[1] as PromiseRejectedResult).reason as RingError).message).toMatch(/truncated/);
    // A well-formed frame whose (offset, length) is not the one expected next.
    const wrong = await runWithFault(Phase.reduceScatter, 7, ({ rings }) => rings.toNext[0].send(dataFrame({ step: 3, length: 17 }, 17)));
    expectAllFailed(wrong, [0, 1, 2, 3], 'p0', ['bad-frame']);
    const oversized = await runWithFault(Phase.reduceScatter, 7, ({ rings }) => rings.toNext[0].send(new Uint8Array(300_000)));
    expectAllFailed(oversized, [0, 1, 2, 3], 'p0', ['bad-frame']);
  });

  it('a late duplicate after a step completed fails the ring; the next step rejects at once, untouched', async () => {
    const mr = memoryRing(['a', 'b']);
    const g = [randomGrad(1000, 1), randomGrad(1000, 2)];
    await Promise.all(mr.rings.map((ring, i) => allReduceSum(g[i], { ring, step: 0 })));
    mr.toNext[0].send(dataFrame({ step: 0, length: 500 }, 500));
    await new Promise((r) => setTimeout(r, 20));
    const before = g[1].slice();
    await expect(allReduceSum(g[1], { ring: mr.rings[1], step: 1 })).rejects.toMatchObject({ kind: 'stale', peerId: 'a' });
    expect(bitwiseEqual(before, g[1])).toBe(true);
    await expect(allReduceSum(g[0], { ring: mr.rings[0], step: 1 })).rejects.toMatchObject({ kind: 'aborted', peerId: 'a', origin: 'stale' });
    for (const r of mr.rings) r.close();
  });

  it.each(['f32', 'f16', 'bf16'] as const)('a gradient holding NaN or Inf is refused before it is added in, blaming its sender (%s wire)', async (wire) => {
    for (const poison of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const mr = memoryRing(IDS);
      const inputs = IDS.map((_, i) => randomGrad(LEN, i + 1));
      inputs[2]![123_456] = poison;
      const outs = inputs.map((g) => g.slice());
      const settled = await Promise.allSettled(mr.rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: 0, wire, keepInput: true })));
      for (const r of mr.rings) r.close();
      settled.forEach((r, i) => {
        expect(r.status, `peer ${i}`).toBe('rejected');
        if (r.status !== 'rejected') return;
        expect(r.reason).toBeInstanceOf(RingError);
        expect((r.reason as RingError).peerId, `peer ${i} blames the poisoned peer`).toBe('p2');
      });
      // Nobody's buffer took the poison (restored or never added).
      for (let i = 0; i < 4; i++) if (i !== 2) expect(outs[i]!.every(Number.isFinite), `peer ${i}`).toBe(true);
    }
  });

  it('a gradient of huge values is refused by the RMS bound before it is added in, blaming its sender', async () => {
    const mr = memoryRing(IDS);
    const inputs = IDS.map((_, i) => randomGrad(LEN, i + 1));
    for (let j = 100_000; j < 100_100; j++) inputs[1]![j] = 1e12;
    const outs = inputs.map((g) => g.slice());
    const settled = await Promise.allSettled(mr.rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: 0, keepInput: true, maxRms: 1e6 })));
    for (const r of mr.rings) r.close();
    settled.forEach((r, i) => {
      expect(r.status, `peer ${i}`).toBe('rejected');
      if (r.status === 'rejected') expect((r.reason as RingError).peerId, `peer ${i}`).toBe('p1');
    });
    // The same honest inputs pass under the same bound.
    const ok = memoryRing(IDS);
    const clean = IDS.map((_, i) => randomGrad(LEN, i + 1));
    await Promise.all(ok.rings.map((ring, i) => allReduceSum(clean[i]!, { ring, step: 0, maxRms: 1e6 })));
    for (const r of ok.rings) r.close();
  });
});

