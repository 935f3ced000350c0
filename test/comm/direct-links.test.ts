// Direct ring links between Node volunteers (src/comm/direct-peer.ts): TLS with a pre-shared key
// over TCP on loopback, routes and keys made by the coordinator's own DirectBook, the ring and
// its formation unchanged on top. Checked: messages cut back out of a byte stream whatever the
// reads; a ring of 4 that sums exactly and bitwise alike over direct links only, and keeps them
// for the next generation; a dial with a wrong key, to a closed port or to an address nobody
// answers falls back to WebRTC (the ring still forms); a stranger's connection is never
// announced. (A cut link between two hosts: test/net/direct-links.test.ts.)
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSignalingServer, type StandaloneSignaling } from '../../coordinator/signaling.ts';
import { DirectBook } from '../../coordinator/direct-links.ts';
import { allReduceSum, openEndpoint, type PeerCtor, type PeerEndpoint, type Ring } from '../../src/comm/index.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../../src/comm/node.ts';
import { DIRECT_CIPHERS, DirectListener, DirectPeer } from '../../src/comm/direct-peer.ts';
import { directKey } from '../../src/comm/direct-key.ts';
import { MAX_STREAM_MESSAGE, StreamSplitter, streamHeader } from '../../src/comm/stream-frames.ts';
import { bitwiseEqual, randomGrad, sum64, worstError } from './helpers.ts';

/** A deterministic generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('messages over a byte stream', () => {
  it('comes out as sent whatever the reads cut, empty messages and split headers included', () => {
    const r = rng(7);
    for (let trial = 0; trial < 200; trial++) {
      const sent = Array.from({ length: 1 + Math.floor(r() * 8) }, () => {
        const m = new Uint8Array(r() < 0.2 ? 0 : Math.floor(r() * 3000));
        for (let i = 0; i < m.length; i++) m[i] = Math.floor(r() * 256);
        return m;
      });
      const stream = new Uint8Array(sent.reduce((n, m) => n + 4 + m.length, 0));
      let at = 0;
      for (const m of sent) {
        stream.set(streamHeader(m.length), at);
        stream.set(m, at + 4);
        at += 4 + m.length;
      }
      const s = new StreamSplitter();
      const got: Uint8Array[] = [];
      for (let from = 0; from < stream.length;) {
        const to = Math.min(stream.length, from + 1 + Math.floor(r() * (r() < 0.3 ? 6 : 5000)));
        const out = s.push(stream.subarray(from, to));
        if (!Array.isArray(out)) throw new Error(out.error);
        got.push(...out);
        from = to;
      }
      expect(s.atBoundary).toBe(true);
      expect(got.map((m) => [...m])).toEqual(sent.map((m) => [...m]));
    }
  });

  it('refuses a length over the limit, then stays refused', () => {
    const s = new StreamSplitter(1000);
    const bad = new Uint8Array(8);
    new DataView(bad.buffer).setUint32(0, 1001);
    expect(s.push(bad)).toEqual({ error: expect.stringContaining('1001 bytes announced') });
    expect(s.push(new Uint8Array(4))).toEqual({ error: expect.stringContaining('1001 bytes announced') });
    expect(() => streamHeader(MAX_STREAM_MESSAGE + 1)).toThrow(/stream message/);
  });
});

let sig: StandaloneSignaling;
let Peer: PeerCtor;

beforeAll(async () => {
  Peer = await loadNodePeer();
  sig = await startSignalingServer({ path: '/signal' });
});
afterAll(async () => {
  await sig?.close();
});

interface DirectNode { ep: PeerEndpoint; peer: DirectPeer; listener: DirectListener; logs: string[] }

/** Endpoints whose Peers take direct links, each with its own listener on loopback, registered in `book` as the coordinator does at a join. */
async function directNodes(names: readonly string[], book: DirectBook): Promise<DirectNode[]> {
  return Promise.all(names.map(async (n) => {
    const { id, token } = sig.signaling.issue(n);
    const listener = await DirectListener.open({ host: '127.0.0.1' });
    const secret = book.register(id, '::ffff:127.0.0.1', listener.port);
    const logs: string[] = [];
    let peer: DirectPeer | null = null;
    const ep = await openEndpoint({
      Peer, id, token, server: { host: '127.0.0.1', port: sig.port, path: '/signal' }, rtcConfig: NODE_RTC_CONFIG,
      wrap: (p) => (peer = new DirectPeer(p, listener, secret, (l) => logs.push(l))),
    });
    return { ep, peer: peer!, listener, logs };
  }));
}

async function closeAll(nodes: readonly DirectNode[], rings: readonly Ring[]): Promise<void> {
  for (const r of rings) r.close();
  for (const n of nodes) {
    n.ep.destroy();
    await n.listener.close();
  }
}

/** Every member learns its routes from `book` (as an assignment carries them) and forms generation `generation`. */
function formAll(nodes: readonly DirectNode[], ids: string[], book: DirectBook, job: number, generation: number): Promise<Ring[]> {
  return Promise.all(nodes.filter((n) => ids.includes(n.ep.id)).map((n) => {
    n.ep.learnRoutes(book.routesFor(n.ep.id, ids) ?? {});
    return n.ep.formRing({ ids, job, generation, connectTimeoutMs: 20_000 });
  }));
}

async function sumsExactly(rings: readonly Ring[], length: number, seed: number, step = 0): Promise<void> {
  const inputs = rings.map((_, i) => randomGrad(length, seed + i));
  const outs = inputs.map((g) => g.slice());
  await Promise.all(rings.map((ring, i) => allReduceSum(outs[i]!, { ring, step })));
  expect(worstError(outs[0]!, sum64(inputs), inputs).rel).toBeLessThanOrEqual(4 * 2 ** -24 * 2);
  for (let i = 1; i < rings.length; i++) expect(bitwiseEqual(outs[i]!, outs[0]!), `peer ${i}`).toBe(true);
}

describe('direct ring links (TLS-PSK over TCP)', () => {
  it('4 peers sum 1M floats exactly and alike over direct links only, and keep them for the next generation', async () => {
    const book = new DirectBook();
    const nodes = await directNodes(['d0', 'd1', 'd2', 'd3'], book);
    let rings: Ring[] = [];
    try {
      const ids = nodes.map((n) => n.ep.id);
      rings = await formAll(nodes, ids, book, 5, 1);
      await sumsExactly(rings, 1 << 20, 10);
      for (const n of nodes) expect(n.peer.counts, n.ep.id).toEqual({ dialed: 1, accepted: 1, fellBack: 0 });
      // Generation 2 without d3: d0..d1 and d1..d2 are kept (REUSE); only d2 -> d0 is new, and direct too.
      rings[3]!.close();
      nodes[3]!.ep.destroy();
      rings.slice(0, 3).forEach((r) => r.release());
      const ids2 = ids.slice(0, 3);
      rings = await formAll(nodes.slice(0, 3), ids2, book, 5, 2);
      expect(rings.map((r) => r.reusedLinks), 'd0 keeps its link to d1, d1 both, d2 its link from d1').toEqual([1, 2, 1]);
      await sumsExactly(rings, 1 << 16, 20, 1);
      expect(nodes.slice(0, 3).map((n) => n.peer.counts.fellBack)).toEqual([0, 0, 0]);
      expect(nodes[2]!.peer.counts.dialed).toBe(2);
    } finally {
      await closeAll(nodes, rings);
    }
  }, 60_000);

  it('a dial with a wrong key or to a closed port falls back to WebRTC, and the ring forms', async () => {
    const book = new DirectBook();
    const nodes = await directNodes(['w0', 'w1', 'w2', 'w3'], book);
    let rings: Ring[] = [];
    try {
      const ids = nodes.map((n) => n.ep.id);
      const routes = ids.map((id) => book.routesFor(id, ids)!);
      const next = (i: number) => ids[(i + 1) % ids.length]!;
      // w0's key to w1 is made for someone else; w1's route to w2 names a port nobody listens on.
      routes[0]![next(0)]!.key = directKey('A'.repeat(43), 'someone-else').toString('base64url');
      routes[1]![next(1)]!.port = 1;
      nodes.forEach((n, i) => n.ep.learnRoutes(routes[i]!));
      rings = await Promise.all(nodes.map((n) => n.ep.formRing({ ids, job: 6, generation: 1, connectTimeoutMs: 20_000 })));
      await sumsExactly(rings, 1 << 16, 30);
      expect(nodes.map((n) => n.peer.counts.fellBack)).toEqual([1, 1, 0, 0]);
      expect(nodes.map((n) => n.peer.counts.dialed)).toEqual([0, 0, 1, 1]);
      expect(nodes[1]!.logs.join('\n')).toMatch(/direct link to w2 at 127\.0\.0\.1:1 failed .*over WebRTC/);
    } finally {
      await closeAll(nodes, rings);
    }
  }, 60_000);

  it('a connection whose key or hello names another peer is never announced', async () => {
    const book = new DirectBook();
    const [node] = await directNodes(['s0'], book);
    try {
      const secret = (book as unknown as { listening: Map<string, { secret: string }> }).listening.get('s0')!.secret;
      const seen: string[] = [];
      node!.ep.peer.on('connection', (c) => seen.push(c.peer));
      // A right key for 'mallory', and a hello claiming to be 'alice': closed before anything is read.
      const closed = await new Promise<boolean>((resolve) => {
        const s = tlsConnect({
          host: '127.0.0.1', port: node!.listener.port, ciphers: DIRECT_CIPHERS, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2',
          pskCallback: () => ({ identity: 'mallory', psk: directKey(secret, 'mallory') }), checkServerIdentity: () => undefined,
        }, () => {
          const hello = new TextEncoder().encode(JSON.stringify({ label: 'x', metadata: { vt: 'ring', job: 1, generation: 1, from: 'alice' } }));
          s.write(streamHeader(hello.length));
          s.write(hello);
        });
        s.on('error', () => undefined);
        s.on('close', () => resolve(true));
        setTimeout(() => { s.destroy(); resolve(false); }, 8000);
      });
      expect(closed).toBe(true);
      // A key of nobody's: the handshake fails.
      const refused = await new Promise<string>((resolve) => {
        const s = tlsConnect({
          host: '127.0.0.1', port: node!.listener.port, ciphers: DIRECT_CIPHERS, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2',
          pskCallback: () => ({ identity: 'eve', psk: Buffer.alloc(32, 1) }), checkServerIdentity: () => undefined,
        }, () => resolve('handshake completed'));
        s.on('error', (e) => resolve(e.message));
      });
      expect(refused).not.toBe('handshake completed');
      expect(seen).toEqual([]);
    } finally {
      await closeAll([node!], []);
    }
  }, 30_000);
});
