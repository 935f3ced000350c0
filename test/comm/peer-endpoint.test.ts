// Ring formation races in PeerEndpoint, made deterministic over fake PeerJS connections: the
// test decides, per dial, when each side's data channel opens, fails or closes (an asymmetric
// failure is what makes prev re-dial: its side of an attempt failed while ours opened).
//
// Invariants checked after every race: the ring only ever reads the connection it was given
// (never one closed or replaced during formation), no honest peer is blamed, and a collective
// over the formed rings sums right. One generation's formation leaks nothing into the next:
// a newer generation ends the older one's formation at once (blaming nobody), and a
// 'peer-unavailable' error reaches the formation dialing that exact peer id.
import { afterEach, describe, expect, it } from 'vitest';
import type { PeerEndpoint } from '../../src/comm/peer-endpoint.ts';
import type { RingMetadata } from '../../src/comm/peerjs-peer.ts';
import { RingError, allReduceSum, type Ring, type Topology } from '../../src/comm/index.ts';
import { formStepRings } from '../../src/client/step-rings.ts';
import { FakeNet, connOf, flush, settlesWithin, type Dial, type FakeConn } from './fake-peerjs.ts';

async function rejection(p: Promise<unknown>): Promise<RingError> {
  const e = await p.then(() => { throw new Error('expected the formation to fail'); }, (x: unknown) => x);
  expect(e).toBeInstanceOf(RingError);
  return e as RingError;
}

const open: Ring[] = [];
afterEach(() => {
  for (const r of open.splice(0)) r.close();
});

/** Every ring sums [rank + 1, ...] over 3000 floats; each must hold the total and no error. */
async function sumsRight(rings: Ring[]): Promise<void> {
  const vectors = rings.map((r) => new Float32Array(3000).fill(r.rank + 1));
  const settled = await Promise.allSettled(rings.map((ring, i) => allReduceSum(vectors[i]!, { ring, step: 1, messageBytes: 32 + 4 * 250 })));
  settled.forEach((s, i) => expect(s.status, `${rings[i]!.selfId}: ${s.status === 'rejected' ? String(s.reason) : ''}`).toBe('fulfilled'));
  const total = (rings.length * (rings.length + 1)) / 2;
  for (const v of vectors) expect([v[0], v[1499], v[2999]]).toEqual([total, total, total]);
  for (const r of rings) expect(r.error, r.selfId).toBeNull();
}

const IDS = ['a', 'b', 'c'];

describe("prev's re-dial during formation", () => {
  it('a re-dial that arrives after the first incoming link opened replaces it before the hand-over', async () => {
    const net = new FakeNet();
    const eps = IDS.map((id) => net.endpoint(id));
    const held: Dial[] = [];
    net.plan = (d) => {
      // a -> b, first attempt: b's end opens, a's end fails (a will re-dial).
      if (d.from === 'a' && d.to === 'b' && d.attempt === 1) { d.deliver(); d.answerer.openNow(); d.dialer.fail('DTLS handshake failed'); return; }
      // The re-dial, and b's own link to c, wait for the test.
      if ((d.from === 'a' && d.to === 'b') || (d.from === 'b' && d.to === 'c')) { held.push(d); return; }
      d.deliver();
      d.open();
    };
    const formed = eps.map((ep) => ep.formRing({ ids: IDS, job: 1, generation: 1, connectTimeoutMs: 5000 }));
    await flush();
    const redial = held.find((d) => d.from === 'a');
    const toC = held.find((d) => d.from === 'b');
    if (!redial || !toC) throw new Error(`a re-dialed b and b dialed c: held ${held.map((d) => `${d.from}>${d.to}#${d.attempt}`).join(', ')}`);
    // b's incoming side had opened: the old code had already settled on that first connection.
    redial.deliver();
    redial.open();
    await flush();
    toC.deliver();
    toC.open();
    const rings = await Promise.all(formed);
    open.push(...rings);
    await sumsRight(rings);
    expect(connOf(rings[1]!.prev), 'b reads the connection a sends on').toBe(redial.answerer);
  });

  it('an incoming link that closes after it opened is not handed over: the re-dial is', async () => {
    const net = new FakeNet();
    const eps = IDS.map((id) => net.endpoint(id));
    const held: Dial[] = [];
    net.plan = (d) => {
      if (d.from === 'a' && d.to === 'b' && d.attempt === 1) {
        // b's end opens; a's end fails and, a moment later, b learns the connection is gone.
        d.deliver();
        d.answerer.openNow();
        d.dialer.fail('ICE failed');
        setTimeout(() => d.answerer.fail('the remote end closed'), 0);
        return;
      }
      if ((d.from === 'a' && d.to === 'b') || (d.from === 'b' && d.to === 'c')) { held.push(d); return; }
      d.deliver();
      d.open();
    };
    const formed = eps.map((ep) => ep.formRing({ ids: IDS, job: 1, generation: 1, connectTimeoutMs: 5000 }));
    formed.forEach((p) => p.catch(() => undefined));
    await flush();
    const redial = held.find((d) => d.from === 'a');
    const toC = held.find((d) => d.from === 'b');
    if (!redial || !toC) throw new Error(`a re-dialed b and b dialed c: held ${held.map((d) => `${d.from}>${d.to}#${d.attempt}`).join(', ')}`);
    // a's first link opened at b, then closed there; now b's link to c opens: b must wait for the re-dial.
    toC.deliver();
    toC.open();
    await flush();
    expect(await settlesWithin(formed[1]!, 20), 'b waits for a link from a that is open').toBe(false);
    redial.deliver();
    redial.open();
    const rings = await Promise.all(formed);
    open.push(...rings);
    await sumsRight(rings);
    expect(connOf(rings[1]!.prev), 'b reads the connection a sends on').toBe(redial.answerer);
  });

  // A guard (it passed before the fix too): after the hand-over a duplicate is refused, never swapped in.
  it('a duplicate after the hand-over is refused and the ring keeps its link', async () => {
    const net = new FakeNet();
    const eps = IDS.map((id) => net.endpoint(id));
    const rings = await Promise.all(eps.map((ep) => ep.formRing({ ids: IDS, job: 1, generation: 1, connectTimeoutMs: 5000 })));
    open.push(...rings);
    const given = connOf(rings[1]!.prev) as FakeConn;
    // A late re-dial of a's (same job, generation, sender) reaches b.
    const late = net.dial('a', 'b', { label: 'vt/1/1', metadata: { vt: 'ring', job: 1, generation: 1, from: 'a' }, serialization: 'raw', reliable: true });
    await flush();
    expect(late.other?.closed, 'the duplicate is closed at b').toBe(true);
    expect(given.closed, 'the ring link is untouched').toBe(false);
    await sumsRight(rings);
  });
});

describe('one generation leaks nothing into the next', () => {
  /** A net where nothing connects: every dial waits (formation stays pending). */
  function silentNet(): { net: FakeNet; b: PeerEndpoint } {
    const net = new FakeNet();
    net.plan = () => undefined;
    return { net, b: net.endpoint('b') };
  }

  it("an abandoned generation's formation ends when the next starts: blames nobody, closes its dial", async () => {
    const { net, b } = silentNet();
    const g1 = b.formRing({ ids: IDS, job: 1, generation: 1, connectTimeoutMs: 60_000 });
    g1.catch(() => undefined);
    await flush();
    const g2 = b.formRing({ ids: IDS, job: 1, generation: 2, connectTimeoutMs: 60_000 });
    g2.catch(() => undefined);
    expect(await settlesWithin(g1, 500), 'generation 1 ended when generation 2 started').toBe(true);
    const e = await rejection(g1);
    expect([e.kind, e.peerId], e.message).toEqual(['closed', 'b']);
    const dial1 = net.dials.find((d) => d.generation === 1);
    expect(dial1?.dialer.closed, "generation 1's dial to c is closed").toBe(true);
    b.destroy();
    expect((await rejection(g2)).kind).toBe('closed');
  });

  it("a peer-unavailable error still fails the newest formation after the abandoned one's ended", async () => {
    const { net, b } = silentNet();
    const g1 = b.formRing({ ids: IDS, job: 1, generation: 1, connectTimeoutMs: 50 });
    g1.catch(() => undefined);
    await flush();
    const g2 = b.formRing({ ids: IDS, job: 1, generation: 2, connectTimeoutMs: 60_000 });
    g2.catch(() => undefined);
    // Generation 1 ends (abandoned, or its timeout) while generation 2 dials the same next.
    expect(await settlesWithin(g1, 1000)).toBe(true);
    net.peer('b').unavailable('c');
    expect(await settlesWithin(g2, 500), 'generation 2 learned that c is unknown').toBe(true);
    const e = await rejection(g2);
    expect([e.kind, e.peerId], e.message).toEqual(['connect-failed', 'c']);
    expect(e.message).toMatch(/does not know c/);
    b.destroy();
  });

  it('peer-unavailable for another id fails nobody, even when one id is a prefix of the other', async () => {
    const { net, b } = silentNet();
    const ids = ['p12', 'b', 'p1']; // prev p12, next p1
    const g = b.formRing({ ids, job: 1, generation: 1, connectTimeoutMs: 60_000 });
    g.catch(() => undefined);
    await flush();
    net.peer('b').unavailable('p12');
    expect(await settlesWithin(g, 100), 'p1 must not be blamed for p12').toBe(false);
    // Not vacuous: the exact id still fails it, at once.
    net.peer('b').unavailable('p1');
    const e = await rejection(g);
    expect([e.kind, e.peerId]).toEqual(['connect-failed', 'p1']);
    b.destroy();
  });

  it('a formation for an older generation than one formed here fails at once, blaming nobody', async () => {
    const net = new FakeNet();
    const eps = IDS.map((id) => net.endpoint(id));
    const rings = await Promise.all(eps.map((ep) => ep.formRing({ ids: IDS, job: 1, generation: 3, connectTimeoutMs: 5000 })));
    open.push(...rings);
    const old = eps[1]!.formRing({ ids: IDS, job: 1, generation: 2, connectTimeoutMs: 60_000 });
    old.catch(() => undefined);
    expect(await settlesWithin(old, 500)).toBe(true);
    const e = await rejection(old);
    expect([e.kind, e.peerId], e.message).toEqual(['closed', 'b']);
    await sumsRight(rings);
  });
});

describe('two rings of one generation, tagged apart (a two-level all-reduce)', () => {
  // Groups [a, b] and [c, d]; columns [a, c] and [b, d]: each peer needs 4 links, 2 per ring.
  const TOPOLOGY: Topology = { groups: [['a', 'b'], ['c', 'd']], shards: 2, columns: [['a', 'c'], ['b', 'd']] };
  const RING = TOPOLOGY.groups.flat();

  it('the group ring and the column ring form at once on one endpoint and sum right in two levels', async () => {
    const net = new FakeNet();
    const eps = RING.map((id) => net.endpoint(id));
    const all = await Promise.all(eps.map((ep) => formStepRings(ep, { ring: RING, job: 1, generation: 1, topology: TOPOLOGY }, {})));
    try {
      // Each peer dialed its group successor and its column successor, each connection tagged.
      expect(net.dials.map((d) => `${d.from}>${d.to}:${(d.dialer.metadata as RingMetadata).tag ?? ''}`).sort()).toEqual(
        ['a>b:group', 'a>c:column', 'b>a:group', 'b>d:column', 'c>a:column', 'c>d:group', 'd>b:column', 'd>c:group']);
      expect(all.map((r) => r.size)).toEqual([4, 4, 4, 4]);
      const vectors = all.map((_, i) => new Float32Array(3001).fill(i + 1));
      await Promise.all(all.map((r, i) => r.allReduce(vectors[i]!, { step: 1, maxRms: Number.POSITIVE_INFINITY })));
      for (const v of vectors) expect([v[0], v[1500], v[3000]]).toEqual([10, 10, 10]);
    } finally {
      for (const r of all) r.close();
    }
  });

  it('a newer generation ends both formations of the older one at once, blaming nobody', async () => {
    const net = new FakeNet();
    net.plan = () => undefined; // nothing connects
    const b = net.endpoint('b');
    const group = b.formRing({ ids: ['a', 'b'], job: 1, generation: 1, connectTimeoutMs: 60_000, tag: 'group' });
    const column = b.formRing({ ids: ['b', 'd'], job: 1, generation: 1, connectTimeoutMs: 60_000, tag: 'column' });
    group.catch(() => undefined);
    column.catch(() => undefined);
    await flush();
    // The column formation did not end the group one: same generation, another tag.
    expect(await settlesWithin(group, 50)).toBe(false);
    const g2 = b.formRing({ ids: IDS, job: 1, generation: 2, connectTimeoutMs: 60_000 });
    g2.catch(() => undefined);
    for (const p of [group, column]) {
      expect(await settlesWithin(p, 500)).toBe(true);
      const e = await rejection(p);
      expect([e.kind, e.peerId], e.message).toEqual(['closed', 'b']);
    }
    b.destroy();
    expect((await rejection(g2)).kind).toBe('closed');
  });
});
