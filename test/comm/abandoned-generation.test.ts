// Issue 13, item 4: an honest peer was blamed for a bad frame right after an abandoned
// generation. The sequence, made deterministic over memory links: generation 1 runs step 7 and
// is abandoned midway (the coordinator moved on; every volunteer closes its ring), with frames
// delivered and frames still in flight; generation 2 re-runs step 7 (the same step number) and
// then step 8, while the abandoned attempt's frames arrive late on the neighbour connections,
// before the collective starts and interleaved with its data. No honest peer may be blamed, the
// old frames must count for nothing, and the sums must be right. A truly bad frame of the
// current generation is still blamed on its sender.
import { describe, expect, it } from 'vitest';
import { RingError, allReduceSum, memoryRing, type MemoryLink } from '../../src/comm/index.ts';
import { FrameKind, HEADER_BYTES, Phase, parseFrame, writeHeader } from '../../src/protocol/frames.ts';
import { bitwiseEqual, randomGrad, sum64, worstError } from './helpers.ts';

const IDS = ['p0', 'p1', 'p2', 'p3'];
const LEN = 20_000;
const MSG = HEADER_BYTES + 4 * 500; // 500 floats a frame: 10 frames per chunk
const STEP = 7;
// float32 rounding of a sum of 4 terms, relative to sum |x_i| (as in allreduce-memory.test.ts).
const TOL = 16 * 2 ** -24;

/** Records a copy of every frame sent on `link` (what the neighbour will, or would, receive). */
function recordSends(link: MemoryLink): Uint8Array[] {
  const sent: Uint8Array[] = [];
  const send = link.send.bind(link);
  link.send = (data: Uint8Array) => {
    sent.push(data.slice());
    send(data);
  };
  return sent;
}

const isData = (f: Uint8Array): boolean => {
  const p = parseFrame(f);
  return p.ok && p.header.kind === FrameKind.data;
};

/**
 * Generation 1 runs step STEP and is abandoned once peer 1 has received `after` data frames:
 * every peer closes its ring. Returns the data frames each peer sent (delivered or in flight).
 */
async function abandonedAttempt(after: number): Promise<Uint8Array[][]> {
  const mr = memoryRing(IDS, { generation: 1 });
  const sent = mr.toNext.map(recordSends);
  let seen = 0;
  mr.fromPrev[1]!.onReceive = (f) => {
    if (isData(f) && ++seen === after) for (const r of mr.rings) r.close();
  };
  const outs = IDS.map((_, i) => randomGrad(LEN, 100 + i));
  const settled = await Promise.allSettled(mr.rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: STEP, messageBytes: MSG })));
  for (const s of settled) {
    expect(s.status, 'the abandoned attempt must not complete').toBe('rejected');
    if (s.status === 'rejected') expect((s.reason as RingError).kind, (s.reason as Error).message).toBe('closed');
  }
  expect(seen, 'abandoned midway, not before it started').toBeGreaterThanOrEqual(after);
  return sent.map((frames) => frames.filter(isData));
}

describe('an abandoned generation, then the same step in the next one', () => {
  it('late frames of the abandoned attempt blame nobody, count for nothing; steps 7 and 8 sum right', async () => {
    const old = await abandonedAttempt(15);
    for (const [i, frames] of old.entries()) expect(frames.length, `peer ${i} sent frames in generation 1`).toBeGreaterThan(0);

    const mr = memoryRing(IDS, { generation: 2 });
    try {
      // Some of the old attempt's frames arrive before anyone starts step 7 in generation 2
      // (held by the link or the ring), the rest interleaved with the new attempt's data.
      const early = old.map((frames) => frames.slice(0, 6));
      const late = old.map((frames) => frames.slice(6));
      early.forEach((frames, i) => { for (const f of frames) mr.toNext[i]!.send(f); });
      let seen = 0;
      mr.fromPrev[2]!.onReceive = (f) => {
        const p = parseFrame(f);
        if (!p.ok || p.header.kind !== FrameKind.data || p.header.generation !== 2) return;
        if (++seen % 3 === 0) late.forEach((frames, i) => { const g = frames.shift(); if (g) mr.toNext[i]!.send(g); });
      };
      for (const step of [STEP, STEP + 1]) {
        const inputs = IDS.map((_, i) => randomGrad(LEN, 10 * step + i));
        const outs = inputs.map((g) => g.slice());
        const settled = await Promise.allSettled(mr.rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step, messageBytes: MSG })));
        settled.forEach((s, i) => expect(s.status, `peer ${i}, step ${step}: ${s.status === 'rejected' ? (s.reason as Error).message : ''}`).toBe('fulfilled'));
        const err = worstError(outs[0]!, sum64(inputs), inputs);
        expect(err.rel, `step ${step}: worst at index ${err.index}`).toBeLessThanOrEqual(TOL);
        for (let i = 1; i < IDS.length; i++) expect(bitwiseEqual(outs[i]!, outs[0]!), `step ${step}: peer ${i} differs from peer 0`).toBe(true);
      }
      // Whatever is left arrives after both steps; then every old frame has reached a ring.
      late.forEach((frames, i) => { for (const f of frames.splice(0)) mr.toNext[i]!.send(f); });
      await new Promise((r) => setTimeout(r, 10));
      // Not vacuous: every old frame reached a generation-2 ring and was dropped there.
      mr.rings.forEach((r, i) => expect(r.droppedFrames, `peer ${i}`).toBe(old[(i + IDS.length - 1) % IDS.length]!.length));
      for (const r of mr.rings) expect(r.error).toBeNull();
    } finally {
      for (const r of mr.rings) r.close();
    }
  });

  it('a bad frame of the current generation (the next ring step\'s chunk) is still blamed on its sender', async () => {
    const mr = memoryRing(IDS, { generation: 2 });
    // p1 expects chunk 0 from p0 first (reduce-scatter, k = 0); p0 sends chunk 3 (the next ring step's).
    const f = new Uint8Array(HEADER_BYTES + 4 * 500);
    writeHeader(
      f, { kind: FrameKind.data, phase: Phase.reduceScatter, dtype: 'f32', job: 1, generation: 2, step: STEP, chunk: 3, offset: 15_000, length: 500 },
    );
    mr.toNext[0]!.send(f);
    const outs = IDS.map((_, i) => randomGrad(LEN, i + 1));
    const settled = await Promise.allSettled(mr.rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step: STEP, messageBytes: MSG, keepInput: true })));
    for (const r of mr.rings) r.close();
    settled.forEach((s, i) => {
      expect(s.status, `peer ${i}`).toBe('rejected');
      if (s.status !== 'rejected') return;
      const e = s.reason as RingError;
      expect(e).toBeInstanceOf(RingError);
      expect(e.peerId, e.message).toBe('p0');
      expect(e.kind === 'aborted' ? e.origin : e.kind).toBe('bad-frame');
    });
    expect(((settled[1] as PromiseRejectedResult).reason as Error).message).toMatch(/expected f32 phase 0 chunk 0 .* got f32 phase 0 chunk 3/);
  });

  it('a frame of another job is still refused, blaming its sender', async () => {
    const mr = memoryRing(['a', 'b'], { generation: 2 });
    const f = new Uint8Array(HEADER_BYTES);
    writeHeader(f, { kind: FrameKind.heartbeat, phase: 0, dtype: 'f32', job: 9, generation: 2, step: 0, chunk: 0, offset: 0, length: 0 });
    mr.toNext[0]!.send(f);
    const g = [randomGrad(1000, 1), randomGrad(1000, 2)];
    const settled = await Promise.allSettled(mr.rings.map((ring, i) => allReduceSum(g[i]!, { ring, step: 0 })));
    for (const r of mr.rings) r.close();
    expect(settled[1]).toMatchObject({ status: 'rejected', reason: { kind: 'stale', peerId: 'a' } });
  });
});
