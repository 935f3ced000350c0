// Peers that were given different collectives for the same generation and step: another ring
// order or size (the churn run's "expected chunk 39, got chunk 38"), another gradient length,
// wire or message size. The sender's PLAN frame opens each collective, so the receiver names
// the disagreement itself instead of blaming an out-of-order chunk. Only the public API is used.
import { describe, expect, it } from 'vitest';
import { RingError, allReduceSum, memoryLinkPair, Ring, type WireFormat } from '../../src/comm/index.ts';
import { randomGrad } from './helpers.ts';

interface Peer { ids: readonly string[]; length: number; wire?: WireFormat; messageBytes?: number }

/** One step over a ring of `ids` whose peers each hold their own view (ids, length, wire, frames). */
async function run(ids: readonly string[], view: (id: string) => Peer): Promise<PromiseSettledResult<Float32Array>[]> {
  const n = ids.length;
  const toNext = ids.map((id, i) => memoryLinkPair(id, ids[(i + 1) % n]));
  const rings = ids.map((selfId, i) => new Ring({
    selfId, ids: view(selfId).ids, job: 1, generation: 3, next: toNext[i][0], prev: toNext[(i - 1 + n) % n][1],
  }));
  try {
    return await Promise.allSettled(rings.map((ring, i) => {
      const v = view(ids[i]);
      return allReduceSum(randomGrad(v.length, i + 1), { ring, step: 5, wire: v.wire, messageBytes: v.messageBytes });
    }));
  } finally {
    for (const r of rings) r.close();
  }
}

/** The error this peer saw itself (not an abort passed on to it). */
function ownError(s: PromiseSettledResult<Float32Array> | undefined): RingError {
  expect(s?.status).toBe('rejected');
  const e = (s as PromiseRejectedResult).reason as unknown;
  expect(e).toBeInstanceOf(RingError);
  return e as RingError;
}

const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `p${i}`);

describe('peers that disagree about the collective', () => {
  it('a peer whose ring list lacks another peer (N=50): named, not "expected chunk 39, got chunk 38"', async () => {
    const all = ids(50);
    // p39 keeps its neighbours p38 and p40 but not p10: it thinks it is rank 38 of 49.
    const short = all.filter((id) => id !== 'p10');
    const settled = await run(all, (id) => ({ ids: id === 'p39' ? short : all, length: 30_000 }));
    settled.forEach((s, i) => expect(s.status, `peer ${i}`).toBe('rejected'));
    const e = ownError(settled[40]);
    expect(e.kind, e.message).toBe('bad-frame');
    expect(e.peerId).toBe('p39');
    expect(e.message).toMatch(/ring size 49 there, 50 here; the sender is rank 38 there, rank 39 here/);
    expect(e.message).not.toMatch(/expected f32 phase 0 chunk 39/);
  });

  it('a peer that counts ranks from elsewhere (same size, same neighbours): named', async () => {
    const all = ids(6);
    // A rotation keeps p0's neighbours (p5, p1) but makes it rank 2.
    const rotated = [...all.slice(4), ...all.slice(0, 4)];
    const settled = await run(all, (id) => ({ ids: id === 'p0' ? rotated : all, length: 1000 }));
    const e = ownError(settled[1]);
    expect(e.peerId).toBe('p0');
    expect(e.message).toMatch(/the sender is rank 2 there, rank 0 here/);
  });

  it('a peer with a longer gradient: both lengths named', async () => {
    const settled = await run(ids(4), (id) => ({ ids: ids(4), length: id === 'p2' ? 1001 : 1000 }));
    const e = ownError(settled[3]);
    expect(e.kind, e.message).toBe('bad-frame');
    expect(e.peerId).toBe('p2');
    expect(e.message).toMatch(/gradient length 1001 there, 1000 here/);
  });

  it('another wire or another message size: named', async () => {
    const wire = await run(ids(3), (id) => ({ ids: ids(3), length: 500, wire: id === 'p1' ? 'f16' : 'f32' }));
    expect(ownError(wire[2]).message).toMatch(/f16 wire there, f32 here/);
    const frames = await run(ids(3), (id) => ({ ids: ids(3), length: 500, messageBytes: id === 'p1' ? 32 + 4 * 100 : 32 + 4 * 50 }));
    expect(ownError(frames[2]).message).toMatch(/100 elements per frame there, 50 here/);
  });

  it('agreeing peers still succeed, empty gradients included', async () => {
    for (const length of [0, 2, 1000]) {
      const settled = await run(ids(5), () => ({ ids: ids(5), length }));
      settled.forEach((s, i) => expect(
        s.status, `length ${length}, peer ${i}: ${s.status === 'rejected' ? (s.reason as Error).message : ''}`,
      ).toBe('fulfilled'));
    }
  });

  it('an empty gradient, one peer starting late, two steps: the PLAN frames wait in the early buffer', async () => {
    const all = ids(3);
    const links = all.map((id, i) => memoryLinkPair(id, all[(i + 1) % 3]));
    const rings = all.map((selfId, i) => new Ring({ selfId, ids: all, job: 1, generation: 3, next: links[i][0], prev: links[(i + 2) % 3][1] }));
    try {
      for (const step of [1, 2]) {
        const first = rings.slice(0, 2).map((ring) => allReduceSum(new Float32Array(0), { ring, step }));
        await new Promise((r) => setTimeout(r, 20));
        await Promise.all([...first, allReduceSum(new Float32Array(0), { ring: rings[2], step })]);
      }
      for (const r of rings) expect(r.error).toBeNull();
    } finally {
      for (const r of rings) r.close();
    }
  });
});
