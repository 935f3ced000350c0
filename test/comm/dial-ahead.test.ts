// Make before break at the endpoint (PeerEndpoint.preDial, LinkPool.park): the peers of a ring
// announced ahead dial their new successors while the old ring still runs; the links wait idle
// in the pools of both ends, and the new generation's formation keeps them by the REUSE
// handshake, dialing nothing. Over fake PeerJS connections; the same path over real WebRTC runs
// in the churn benchmark and in webrtc-node.test.ts.
//
// Checked each time: which connections each generation dialed, that the sums are right and the
// same bits on every peer, and that no connection is left open that no ring holds.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PRE_DIAL_WAIT_MS } from '../../src/comm/peer-endpoint.ts';
import { MAX_IDLE_MS, PARKED_IDLE_MS } from '../../src/comm/link-pool.ts';
import type { Ring } from '../../src/comm/index.ts';
import { aheadLinks } from '../../src/client/volunteer-ring.ts';
import { flush } from './fake-peerjs.ts';
import { closeEndpoints, dialsOf, ep, formAll, network, onlyRingsHoldConnections, sumsRight } from './reuse-helpers.ts';

afterEach(closeEndpoints);

/** Every member of `ids` dials ahead for the ring `ids`, as on a coordinator's 'prepare'. */
function dialAhead(eps: Parameters<typeof ep>[0], ids: string[]): Promise<{ dialed: number; opened: number }[]> {
  return Promise.all(ids.map((id) => ep(eps, id).preDial(1, aheadLinks({ ring: ids }, id)!)));
}

/** The dials made ahead (metadata pre), as 'from>to'. */
const aheadDials = (net: ReturnType<typeof network>['net']): string[] =>
  net.dials.filter((d) => (d.dialer.metadata as { pre?: boolean }).pre === true).map((d) => `${d.from}>${d.to}`).sort();

describe('dialing ahead of a membership change', () => {
  it('c leaves and f joins a ring of 5: only the new pairs dial ahead, and the new generation dials nothing', async () => {
    const { net, eps } = network(['a', 'b', 'c', 'd', 'e', 'f']);
    const g1Ids = ['a', 'b', 'c', 'd', 'e'];
    const g1 = await Promise.all(formAll(eps, g1Ids, 1));
    await sumsRight(g1, 1);
    // Announced: c out, f in. The old ring trains on while the new pairs connect.
    const g2Ids = ['a', 'b', 'd', 'e', 'f'];
    const outcome = await dialAhead(eps, g2Ids);
    expect(aheadDials(net), 'b -> d, e -> f, f -> a: the pairs that are new').toEqual(['b>d', 'e>f', 'f>a']);
    expect(outcome.map((o) => o.dialed)).toEqual([0, 1, 0, 1, 1]);
    expect(outcome.every((o) => o.opened === o.dialed)).toBe(true);
    await sumsRight(g1, 2);
    // The change: the old rings are released (c leaves), the new generation forms.
    g1.forEach((r) => (r.selfId === 'c' ? r.close() : r.release()));
    const g2 = await Promise.all(formAll(eps, g2Ids, 2));
    expect(dialsOf(net, 2), 'no dial for generation 2').toEqual([]);
    expect(g2.map((r) => r.reusedLinks)).toEqual([2, 2, 2, 2, 2]);
    expect(g2.map((r) => r.attempts.dials)).toEqual([0, 0, 0, 0, 0]);
    await sumsRight(g2, 2);
    await flush();
    onlyRingsHoldConnections(net, g2);
    for (const r of g2) r.close();
  });

  it('a dial ahead that fails at once is made once more; the new generation still dials nothing', async () => {
    const { net, eps } = network(['a', 'b', 'c']);
    const g1 = await Promise.all(formAll(eps, ['a', 'b'], 1));
    // The first dial ahead c -> a fails on both ends (its data channel errors); the rest connect.
    net.plan = (d) => {
      if ((d.dialer.metadata as { pre?: boolean }).pre === true && d.from === 'c' && d.to === 'a'
        && !net.dials.some((x) => x !== d && x.from === 'c' && x.to === 'a')) {
        d.deliver();
        d.dialer.fail('DTLS failed');
        d.answerer.fail('DTLS failed');
        return;
      }
      d.deliver();
      d.open();
    };
    const outcome = await dialAhead(eps, ['a', 'b', 'c']);
    expect(aheadDials(net), 'c -> a twice, b -> c once').toEqual(['b>c', 'c>a', 'c>a']);
    expect(outcome, 'every new pair opened').toEqual([{ dialed: 0, opened: 0 }, { dialed: 1, opened: 1 }, { dialed: 1, opened: 1 }]);
    g1.forEach((r) => r.release());
    const g2 = await Promise.all(formAll(eps, ['a', 'b', 'c'], 2));
    expect(dialsOf(net, 2), 'no dial for generation 2').toEqual([]);
    await sumsRight(g2, 2);
    for (const r of g2) r.close();
  });

  it('a dial ahead from a peer that is not the prev we were told of is closed, unread, after PRE_DIAL_WAIT_MS', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { net, eps } = network(['a', 'b', 'x']);
      // The coming ring is [a, b]: b expects a as its prev; x dials b ahead anyway.
      const ab = dialAhead(eps, ['a', 'b']);
      await vi.advanceTimersByTimeAsync(10);
      await ab;
      const fromX = ep(eps, 'x').preDial(1, [{ tag: '', nextId: 'b', prevId: 'b' }]);
      await vi.advanceTimersByTimeAsync(PRE_DIAL_WAIT_MS + 10);
      await fromX;
      const d = net.dials.find((x) => x.from === 'x' && x.to === 'b')!;
      expect(d.answerer.closed && d.dialer.closed, 'b closed it, unread').toBe(true);
      expect(ep(eps, 'x').keptLinks.open, 'x keeps nothing').toBe(0);
      expect(ep(eps, 'b').keptLinks, 'b keeps its link to a and the one from a, idle').toEqual({ open: 2, idle: 2 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("a dial ahead that comes before the receiver heard of the ring waits for it, then is kept; a stranger's is closed after PRE_DIAL_WAIT_MS", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { net, eps } = network(['a', 'b', 'x']);
      // a dials b ahead before b's own announcement came; x (not in the ring) does too.
      const fromA = ep(eps, 'a').preDial(1, [{ tag: '', nextId: 'b', prevId: 'b' }]);
      const fromX = ep(eps, 'x').preDial(1, [{ tag: '', nextId: 'b', prevId: 'b' }]);
      await vi.advanceTimersByTimeAsync(10);
      expect(await fromA).toEqual({ dialed: 1, opened: 1 });
      await fromX;
      // b hears of the ring [a, b]: a's early link is parked, and b dials a ahead.
      await ep(eps, 'b').preDial(1, [{ tag: '', nextId: 'a', prevId: 'a' }]);
      await vi.advanceTimersByTimeAsync(10);
      expect(ep(eps, 'b').keptLinks).toEqual({ open: 2, idle: 2 });
      await vi.advanceTimersByTimeAsync(PRE_DIAL_WAIT_MS + 10);
      const stray = net.dials.find((d) => d.from === 'x')!;
      expect(stray.answerer.closed, "x's dial ahead closed at b").toBe(true);
      expect(ep(eps, 'b').keptLinks, "a's link kept").toEqual({ open: 2, idle: 2 });
    } finally {
      vi.useRealTimers();
    }
  });

  it('links dialed ahead outlast a released link\'s idle bound (a joiner loading for a minute): the change still dials nothing; ' +
    'unused, they close after PARKED_IDLE_MS', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    // Fake time moves in 10 ms ticks until `p` settles (at most 10 s of it).
    const settled = async <T,>(p: Promise<T>): Promise<T> => {
      let done = false;
      p.then(() => { done = true; }, () => { done = true; });
      for (let i = 0; i < 1000 && !done; i++) await vi.advanceTimersByTimeAsync(10);
      return p;
    };
    try {
      const { net, eps } = network(['a', 'b', 'c', 'd', 'e']);
      const g1 = await settled(Promise.all(formAll(eps, ['a', 'b', 'c'], 1)));
      // d joins after c; the change is made a minute later (its checkpoint loading on a busy machine).
      await settled(dialAhead(eps, ['a', 'b', 'c', 'd']));
      expect(aheadDials(net)).toEqual(['c>d', 'd>a']);
      expect(MAX_IDLE_MS).toBeLessThan(60_000);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(ep(eps, 'd').keptLinks, "d's links dialed ahead are still open a minute later").toEqual({ open: 2, idle: 2 });
      g1.forEach((r) => r.release());
      const g2 = await settled(Promise.all(formAll(eps, ['a', 'b', 'c', 'd'], 2)));
      expect(dialsOf(net, 2), 'no dial for generation 2').toEqual([]);
      expect(g2.map((r) => r.reusedLinks)).toEqual([2, 2, 2, 2]);
      await vi.advanceTimersByTimeAsync(10);
      onlyRingsHoldConnections(net, g2);
      // Announced again with e, which never comes: e's link dialed ahead waits PARKED_IDLE_MS, then closes.
      await settled(dialAhead(eps, ['a', 'b', 'c', 'd', 'e']));
      expect(ep(eps, 'e').keptLinks, "e's links dialed ahead, parked").toEqual({ open: 2, idle: 2 });
      await vi.advanceTimersByTimeAsync(PARKED_IDLE_MS - 1000);
      expect(ep(eps, 'e').keptLinks.open, 'still parked just before PARKED_IDLE_MS').toBe(2);
      await vi.advanceTimersByTimeAsync(1010);
      expect(ep(eps, 'e').keptLinks.open, 'closed after PARKED_IDLE_MS unused').toBe(0);
      for (const r of g2) r.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('a ring announced that does not come: its idle links are closed when the ring that came formed', async () => {
    const { net, eps } = network(['a', 'b', 'c', 'd']);
    const g1 = await Promise.all(formAll(eps, ['a', 'b', 'c'], 1));
    // d announced as joining after c, then the coordinator forms a ring without it (d crashed).
    await dialAhead(eps, ['a', 'b', 'c', 'd']);
    expect(aheadDials(net)).toEqual(['c>d', 'd>a']);
    g1.forEach((r) => r.release());
    ep(eps, 'd').destroy();
    const g2: Ring[] = await Promise.all(formAll(eps, ['a', 'b', 'c'], 2));
    expect(dialsOf(net, 2)).toEqual([]);
    await sumsRight(g2, 1);
    await flush();
    onlyRingsHoldConnections(net, g2);
    for (const r of g2) r.close();
  });

  it('an announcement made again while its dial ahead is still opening does not dial twice', async () => {
    const { net, eps } = network(['a', 'b']);
    const first = dialAhead(eps, ['a', 'b']);
    const again = dialAhead(eps, ['a', 'b']);
    await Promise.all([first, again]);
    expect(aheadDials(net), 'one connection each way').toEqual(['a>b', 'b>a']);
    // A dial ahead settles when the dialing end opens; the accepting end parks its link once the dialer's READY answer came.
    await flush();
    for (const id of ['a', 'b']) expect(ep(eps, id).keptLinks, id).toEqual({ open: 2, idle: 2 });
  });

  it('peers already kept in that role are not dialed again; a peer not in the ring dials nothing', async () => {
    const { net, eps } = network(['a', 'b', 'c']);
    const g1 = await Promise.all(formAll(eps, ['a', 'b', 'c'], 1));
    const same = await dialAhead(eps, ['a', 'b', 'c']);
    expect(same.map((o) => o.dialed)).toEqual([0, 0, 0]);
    expect(aheadLinks({ ring: ['a', 'b'] }, 'c')).toBeNull();
    expect(aheadDials(net)).toEqual([]);
    for (const r of g1) r.close();
  });
});

describe('aheadLinks: what a peer dials ahead for a planned generation', () => {
  it('flat: its successor and predecessor; two-level: in its group ring and, for a shard owner, its column ring', () => {
    expect(aheadLinks({ ring: ['a', 'b', 'c'] }, 'a')).toEqual([{ tag: '', nextId: 'b', prevId: 'c' }]);
    expect(aheadLinks({ ring: ['a'] }, 'a')).toEqual([]);
    const topology = { groups: [['a', 'b', 'c'], ['d', 'e']], shards: 2, columns: [['a', 'd'], ['b', 'e']] };
    const ring = topology.groups.flat();
    expect(aheadLinks({ ring, topology }, 'b')).toEqual([{ tag: 'group', nextId: 'c', prevId: 'a' }, { tag: 'column', nextId: 'e', prevId: 'e' }]);
    expect(aheadLinks({ ring, topology }, 'c'), 'not a shard owner: no column').toEqual([{ tag: 'group', nextId: 'a', prevId: 'b' }]);
  });
});
