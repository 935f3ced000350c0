// PeerJsLink's READY rule (src/comm/peerjs-link.ts): the accepting end of a new connection says
// READY as soon as its side is open; the dialing end holds what it sends, in order and counted in
// bufferedAmount, until it has heard the other end, then answers READY, sends it all and wakes
// a sender waiting on back-pressure; the accepting end's link opens once it has that answer.
// READY never reaches whoever listens to the link. Real node-datachannel connections under the
// same rule: ndc-order.test.ts.
import { describe, expect, it } from 'vitest';
import { PeerJsLink } from '../../src/comm/peerjs-link.ts';
import { isReadyFrame, readyFrame } from '../../src/protocol/frames.ts';
import { FakeConn, flush } from './fake-peerjs.ts';

/** Two ends of one connection, not open yet, and what each end's connection was asked to send. */
function pair(): { dialer: FakeConn; answerer: FakeConn; sentBy: Map<FakeConn, Uint8Array[]> } {
  const dialer = new FakeConn('b', {});
  const answerer = new FakeConn('a', {});
  dialer.other = answerer;
  answerer.other = dialer;
  const sentBy = new Map<FakeConn, Uint8Array[]>([[dialer, []], [answerer, []]]);
  for (const c of [dialer, answerer]) {
    const send = c.send.bind(c);
    c.send = (data: Uint8Array) => {
      if (c.open) sentBy.get(c)!.push(data.slice());
      send(data);
    };
  }
  return { dialer, answerer, sentBy };
}

const frame = (n: number, bytes = 64): Uint8Array => new Uint8Array(bytes).fill(n);

function listen(link: PeerJsLink): { frames: number[][]; drains: number } {
  const got = { frames: [] as number[][], drains: 0 };
  link.listen({ frame: (f) => got.frames.push([...f.subarray(0, 2)]), drain: () => { got.drains++; }, close: () => undefined });
  return got;
}

describe('PeerJsLink: the dialing end sends nothing before it has heard the accepting end', () => {
  it('holds frames in order until READY, counts them as buffered, then sends them and wakes the sender', async () => {
    const { dialer, answerer, sentBy } = pair();
    const out = new PeerJsLink(dialer, 'dialed');
    const seen = listen(out);
    // The dialer's side opens first (libdatachannel: on the accepting end's ACK, sent before its JavaScript took the channel).
    dialer.openNow();
    await out.opened;
    out.send(frame(1));
    out.send(frame(2, 100));
    expect(sentBy.get(dialer)).toEqual([]);
    expect(out.bufferedAmount).toBe(164);
    expect(out.hearing).toBe(false);
    // The accepting end takes the channel and says READY.
    const inn = new PeerJsLink(answerer, 'accepted');
    const heard = listen(inn);
    answerer.openNow();
    await inn.opened;
    expect(sentBy.get(answerer)!.map(isReadyFrame)).toEqual([true]);
    await flush();
    expect(out.hearing).toBe(true);
    expect(out.bufferedAmount).toBe(0);
    expect(seen.drains).toBe(1);
    expect(seen.frames).toEqual([]); // READY is the link's own
    out.send(frame(3));
    // The dialing end answers READY first (the accepting end takes the link only then), then what it held.
    expect(sentBy.get(dialer)!.map((f) => (isReadyFrame(f) ? 'ready' : f[0]))).toEqual(['ready', 1, 2, 3]);
    await flush();
    expect(heard.frames).toEqual([[1, 1], [2, 2], [3, 3]]);
    // Their link machines (src/comm/link-machine.ts): the dialing end opened on its channel, the accepting end on the answer.
    expect(out.machine.trail).toEqual(['Dialing -> Open']);
    expect(inn.machine.trail).toEqual(['Accepting -> Answered', 'Answered -> Open']);
    out.close();
    await flush();
    expect([out.machine.phase, inn.machine.phase]).toEqual(['Closed', 'Closed']);
  });

  it('answers a READY heard before its own channel said open once it opens, with what it held, in order', async () => {
    const { dialer, answerer, sentBy } = pair();
    const out = new PeerJsLink(dialer, 'dialed');
    const inn = new PeerJsLink(answerer, 'accepted');
    const heard = listen(inn);
    answerer.openNow();
    // A stack that hands the accepting end's READY to the dialing end before the dialing end's own open event.
    dialer.deliverNow(readyFrame());
    expect(out.hearing).toBe(false);
    dialer.openNow();
    await out.opened;
    out.send(frame(4));
    expect(sentBy.get(dialer)!.map((f) => (isReadyFrame(f) ? 'ready' : f[0]))).toEqual(['ready', 4]);
    await inn.opened;
    await flush();
    expect(heard.frames).toEqual([[4, 4]]);
  });

  it('takes any frame of the other end as heard, and delivers it', async () => {
    const { dialer, answerer } = pair();
    const out = new PeerJsLink(dialer, 'dialed');
    const seen = listen(out);
    dialer.openNow();
    await out.opened;
    out.send(frame(7));
    answerer.open = true; // a remote that says nothing first: its heartbeat is heard
    answerer.send(frame(9));
    await flush();
    expect(out.hearing).toBe(true);
    expect(seen.frames).toEqual([[9, 9]]);
  });

  it('on the accepting end: says READY once open, is open once the dialing end answers, sends at once, and keeps a READY from the listener', async () => {
    const { dialer, answerer, sentBy } = pair();
    const inn = new PeerJsLink(answerer, 'accepted');
    const heard = listen(inn);
    expect(inn.hearing).toBe(true);
    let open = false;
    void inn.opened.then(() => { open = true; });
    answerer.openNow();
    await flush();
    expect(sentBy.get(answerer)!.map(isReadyFrame)).toEqual([true]);
    expect(open, 'not open before the dialing end answered: it may still close its side').toBe(false);
    dialer.open = true;
    dialer.send(readyFrame());
    dialer.send(frame(5));
    await inn.opened;
    inn.send(frame(4));
    expect(sentBy.get(answerer)!.map((f) => (isReadyFrame(f) ? 'ready' : f[0]))).toEqual(['ready', 4]);
    await flush();
    expect(heard.frames).toEqual([[5, 5]]);
  });

  it('on the accepting end: a dialing end that closes before it answers leaves the link unopened (formation waits for its next attempt)', async () => {
    const { dialer, answerer } = pair();
    const inn = new PeerJsLink(answerer, 'accepted');
    answerer.openNow();
    await flush();
    dialer.open = true;
    dialer.close(); // the hedge of link-formation.ts: its side had not opened yet
    await expect(inn.opened).rejects.toThrow(/remote end closed/);
    expect(inn.closed).toBe(true);
  });

  it('sends nothing it held once closed', async () => {
    const { dialer, answerer, sentBy } = pair();
    const out = new PeerJsLink(dialer, 'dialed');
    dialer.openNow();
    await out.opened;
    out.send(frame(1));
    out.close();
    expect(out.bufferedAmount).toBe(0);
    answerer.openNow();
    answerer.send(readyFrame());
    await flush();
    expect(sentBy.get(dialer)).toEqual([]);
  });
});
