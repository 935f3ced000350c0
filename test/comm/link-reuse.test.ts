// Link reuse across generations (src/comm/link-pool.ts), over fake PeerJS connections: a ring
// that is released hands its links to the endpoint's pool, and the next generation's ring keeps
// each link whose two ends are again neighbours in the same role, agreed in a handshake on the
// link itself; everything else is dialed as before.
//
// Checked each time: which connections were dialed for the new generation (none for an unchanged
// pair), that the sums are right and the same bits on every peer, that nobody is blamed, and that
// no connection is left open that no ring holds.
import { afterEach, describe, expect, it } from 'vitest';
import { RingError, allReduceSum, memoryRing, type Link, type Ring, type Topology } from '../../src/comm/index.ts';
import { REUSE_ACK_MS } from '../../src/comm/link-pool.ts';
import { FrameKind, HEADER_BYTES, parseReuse, reuseFrame } from '../../src/protocol/frames.ts';
import { formStepRings } from '../../src/client/step-rings.ts';
import { baseOf, connOf, flush, settlesWithin, type FakeConn } from './fake-peerjs.ts';
import { closeEndpoints, dialsOf, ep, formAll, network, onlyRingsHoldConnections, sumsRight } from './reuse-helpers.ts';

afterEach(closeEndpoints);

describe('a new generation keeps the links of unchanged neighbour pairs', () => {
  it('one peer leaves a ring of 5: three pairs keep their links, the two new neighbours dial; sums right', async () => {
    const g1Ids = ['a', 'b', 'c', 'd', 'e'];
    const { net, eps } = network(g1Ids);
    const g1 = await Promise.all(formAll(eps, g1Ids, 1));
    await sumsRight(g1, 5);
    expect(g1.map((r) => r.reusedLinks)).toEqual([0, 0, 0, 0, 0]);
    // The coordinator moves on without c: the others release their rings; c leaves (closes).
    g1.forEach((r) => (r.selfId === 'c' ? r.close() : r.release()));
    const g2Ids = ['a', 'b', 'd', 'e'];
    const g2 = await Promise.all(formAll(eps, g2Ids, 2));
    // The same step number as in generation 1: nothing of the old ring may count.
    await sumsRight(g2, 5);
    await sumsRight(g2, 6);
    expect(dialsOf(net, 2), 'only b dials its new next').toEqual(['b>d']);
    expect(g2.map((r) => r.reusedLinks)).toEqual([2, 1, 1, 2]);
    // The connections under the kept links are the ones generation 1 dialed.
    const g1Conn = (from: string, to: string) => net.dials.find((d) => d.generation === 1 && d.from === from && d.to === to);
    expect(connOf(g2[0]!.next)).toBe(g1Conn('a', 'b')?.dialer);
    expect(connOf(g2[1]!.prev)).toBe(g1Conn('a', 'b')?.answerer);
    // Each end's link machine (src/comm/link-machine.ts), named: A offered and adopted on the ACK, B acked and adopted on the CONFIRM.
    const phases = (l: Link | null) => baseOf(l).machine.trail;
    expect(phases(g2[0]!.next)).toEqual(['Dialing -> Open', 'Open -> Leased', 'Leased -> Idle', 'Idle -> Offering', 'Offering -> Leased']);
    expect(phases(g2[1]!.prev)).toEqual(['Accepting -> Answered', 'Answered -> Open', 'Open -> Leased', 'Leased -> Idle', 'Idle -> Acked', 'Acked -> Leased']);
    await flush();
    onlyRingsHoldConnections(net, g2);
    for (const id of g2Ids) expect(ep(eps, id).keptLinks, id).toEqual({ open: 2, idle: 0 });
    for (const r of g2) r.close();
  });

  it('a two-level generation keeps all its group and column links when the plan stays the same', async () => {
    const topology: Topology = { groups: [['a', 'b'], ['c', 'd']], shards: 2, columns: [['a', 'c'], ['b', 'd']] };
    const ids = topology.groups.flat();
    const { net, eps } = network(ids);
    const form = (generation: number) => Promise.all(ids.map((id) => formStepRings(ep(eps, id), { ring: ids, job: 1, generation, topology }, {})));
    const g1 = await form(1);
    for (const r of g1) r.release();
    const g2 = await form(2);
    try {
      expect(dialsOf(net, 2)).toEqual([]);
      // Nothing dialed: both rings took their link to next from the pool, and their link from prev was offered by it.
      expect(g2.map((r) => r.links)).toEqual(ids.map(() => ({ total: 4, reused: 4, dials: 0, offers: 2 })));
      const vectors = g2.map((_, i) => new Float32Array(3001).fill(i + 1));
      await Promise.all(g2.map((r, i) => r.allReduce(vectors[i]!, { step: 1, maxRms: Number.POSITIVE_INFINITY })));
      for (const v of vectors) expect([v[0], v[1500], v[3000]]).toEqual([10, 10, 10]);
    } finally {
      for (const r of g2) r.close();
    }
  });
});

describe('falling back to a dial', () => {
  it('prev closed its kept link: next sees the close and dials at once', async () => {
    const ids = ['a', 'b', 'c'];
    const { net, eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1));
    const atB = connOf(g1[1]!.prev);
    for (const r of g1) r.release();
    atB.close(); // b lost its end of a -> b (a hears of it a macrotask later)
    await flush();
    const t0 = Date.now();
    const g2 = await Promise.all(formAll(eps, ids, 2));
    expect(Date.now() - t0, 'no wait for an answer on a closed link').toBeLessThan(REUSE_ACK_MS / 2);
    expect(dialsOf(net, 2)).toEqual(['a>b']);
    expect(g2.map((r) => r.reusedLinks)).toEqual([1, 1, 2]);
    await sumsRight(g2, 1);
    for (const r of g2) r.close();
  });

  it("prev's end vanished without a word: next gives up after REUSE_ACK_MS, dials, and the ring forms", async () => {
    const ids = ['a', 'b', 'c'];
    const { net, eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1));
    const atB = connOf(g1[1]!.prev) as FakeConn;
    for (const r of g1) r.release();
    atB.fail('the data channel failed at b only'); // a's end stays open; what a sends is lost
    await flush();
    const t0 = Date.now();
    const g2 = await Promise.all(formAll(eps, ids, 2));
    const took = Date.now() - t0;
    expect(took, 'a waited for the answer before dialing').toBeGreaterThanOrEqual(REUSE_ACK_MS - 50);
    expect(took, 'and not much longer').toBeLessThan(REUSE_ACK_MS + 1000);
    expect(dialsOf(net, 2)).toEqual(['a>b']);
    expect(g2.map((r) => r.reusedLinks)).toEqual([1, 1, 2]);
    await sumsRight(g2, 1);
    await flush();
    onlyRingsHoldConnections(net, g2);
    for (const r of g2) r.close();
  });
});

describe('the handshake frame arrives before the other side forms', () => {
  it('while the old ring still holds the link: the REUSE frame is kept, not dropped with the old generation', async () => {
    const ids = ['a', 'b', 'c'];
    const { net, eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1, 10_000));
    // a and c move on; b has not heard of generation 2 yet and still runs its ring of generation 1.
    g1[0]!.release();
    g1[2]!.release();
    const early = ['a', 'c'].map((id) => ep(eps, id).formRing({ ids, job: 1, generation: 2, connectTimeoutMs: 10_000 }));
    await new Promise((r) => setTimeout(r, 100));
    expect(g1[1]!.error, "b's old ring saw nothing wrong").toBeNull();
    g1[1]!.release();
    const late = ep(eps, 'b').formRing({ ids, job: 1, generation: 2, connectTimeoutMs: 10_000 });
    const g2 = await Promise.all([early[0]!, late, early[1]!]);
    expect(dialsOf(net, 2)).toEqual([]);
    expect(g2.map((r) => r.reusedLinks)).toEqual([2, 2, 2]);
    await sumsRight(g2, 1);
    for (const r of g2) r.close();
  });

  it('while the link is idle in the pool: the offer waits for the formation', async () => {
    const ids = ['a', 'b', 'c'];
    const { net, eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1));
    for (const r of g1) r.release();
    const [a, c] = ['a', 'c'].map((id) => ep(eps, id).formRing({ ids, job: 1, generation: 2, connectTimeoutMs: 10_000 }));
    await new Promise((r) => setTimeout(r, 100));
    const b = ep(eps, 'b').formRing({ ids, job: 1, generation: 2, connectTimeoutMs: 10_000 });
    const g2 = await Promise.all([a!, b, c!]);
    expect(dialsOf(net, 2)).toEqual([]);
    expect(g2.map((r) => r.reusedLinks)).toEqual([2, 2, 2]);
    await sumsRight(g2, 1);
    for (const r of g2) r.close();
  });
});

describe('abandoned generations and blame', () => {
  it('a generation abandoned mid-handshake leaves no connection nobody holds, and blames nobody', async () => {
    const ids = ['a', 'b', 'c'];
    const { net, eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1));
    for (const r of g1) r.release();
    // Generation 2 starts at a and c only: c -> a completes its handshake (both adopt the link),
    // a -> b waits for b's answer (b never forms generation 2).
    const g2 = [
      ep(eps, 'a').formRing({ ids, job: 1, generation: 2, connectTimeoutMs: 10_000 }),
      ep(eps, 'c').formRing({ ids, job: 1, generation: 2, connectTimeoutMs: 10_000 }),
    ];
    for (const p of g2) p.catch(() => undefined);
    await flush();
    for (const p of g2) expect(await settlesWithin(p, 20), 'generation 2 is still forming').toBe(false);
    // The coordinator moves on: generation 3 everywhere.
    const g3p = formAll(eps, ids, 3);
    for (const p of g2) {
      const e = await p.then(() => { throw new Error('generation 2 must not form'); }, (x: unknown) => x);
      expect(e).toBeInstanceOf(RingError);
      expect([(e as RingError).kind, (e as RingError).peerId === (e as RingError).reportedBy], (e as Error).message).toEqual(['closed', true]);
    }
    const g3 = await Promise.all(g3p);
    // a -> b was still only offered: kept for generation 3. c -> a had been adopted by the
    // abandoned formations, which closed it: dialed again. b -> c was idle: kept.
    expect(dialsOf(net, 2)).toEqual([]);
    expect(dialsOf(net, 3)).toEqual(['c>a']);
    expect(g3.map((r) => r.reusedLinks)).toEqual([1, 2, 1]);
    await sumsRight(g3, 1);
    await flush();
    onlyRingsHoldConnections(net, g3);
    for (const id of ids) expect(ep(eps, id).keptLinks, id).toEqual({ open: 2, idle: 0 });
    for (const r of g3) r.close();
  });

  it('after a failure blamed on a neighbour, the link to it is closed and dialed anew; the others are kept', async () => {
    const ids = ['a', 'b', 'c'];
    const { net, eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1));
    const failed = g1.map((r) => new Promise<RingError>((resolve) => r.onError(resolve)));
    // a sends b a truncated frame: b blames a (bad-frame) and aborts the ring both ways.
    g1[0]!.next!.send(new Uint8Array(7));
    const errors = await Promise.all(failed);
    expect(errors.map((e) => e.peerId), errors.map((e) => e.message).join('\n')).toEqual(['a', 'a', 'a']);
    expect(errors[1]!.kind).toBe('bad-frame');
    // Each peer releases its failed ring (as the volunteer does): b and c close their links to a.
    for (const r of g1) r.release();
    await flush();
    expect(ep(eps, 'b').keptLinks).toEqual({ open: 1, idle: 1 });
    const g2 = await Promise.all(formAll(eps, ids, 2));
    expect(dialsOf(net, 2)).toEqual(['a>b', 'c>a']);
    expect(g2.map((r) => r.reusedLinks)).toEqual([0, 1, 1]);
    await sumsRight(g2, 1);
    for (const r of g2) r.close();
  });

  it('destroy closes kept links too: a neighbour notices at once', async () => {
    const ids = ['a', 'b', 'c'];
    const { eps } = network(ids);
    const g1 = await Promise.all(formAll(eps, ids, 1));
    for (const r of g1) r.release();
    expect(ep(eps, 'a').keptLinks).toEqual({ open: 2, idle: 2 });
    ep(eps, 'b').destroy();
    await flush();
    expect(ep(eps, 'b').keptLinks).toEqual({ open: 0, idle: 0 });
    expect(ep(eps, 'a').keptLinks, "a's link to b is gone, its link from c is not").toEqual({ open: 1, idle: 1 });
  });
});

describe('the handshake frames', () => {
  it('carry job, generation and tag; a frame with a tag that is not one is refused', () => {
    for (const tag of ['', 'group', 'column']) {
      const n = { kind: FrameKind.reuseAck, job: 3, generation: 0xfffffffe, tag } as const;
      expect(parseReuse(reuseFrame(n))).toEqual(n);
    }
    const bad = reuseFrame({ kind: FrameKind.reuse, job: 1, generation: 2, tag: 'Bad/Tag' });
    expect(parseReuse(bad)).toBeNull();
    expect(parseReuse(bad.subarray(0, HEADER_BYTES + 2)), 'truncated').toBeNull();
  });

  it('a ring on links without a pool ignores them, blaming nobody', async () => {
    const mr = memoryRing(['a', 'b', 'c'], { generation: 4 });
    for (const kind of [FrameKind.reuse, FrameKind.reuseAck, FrameKind.reuseConfirm]) {
      mr.toNext[0]!.send(reuseFrame({ kind, job: 1, generation: 4, tag: '' }));
      mr.fromPrev[2]!.send(reuseFrame({ kind, job: 1, generation: 5, tag: '' }));
    }
    await sumsRight(mr.rings, 1);
    for (const r of mr.rings) r.close();
  });
});
