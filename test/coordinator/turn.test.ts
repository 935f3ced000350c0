// The TURN relay: a real coturn started by the coordinator's code, with TURN REST
// credentials; two real WebRTC peers (node-datachannel) forced through it, the relay refusing
// a wrong secret (and the self-check saying so), and the errors for a missing binary and a
// port in use.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { turnCredentials } from '../../coordinator/ice.ts';
import { startTurnRelay, TurnError, turnConfig, type TurnRelay } from '../../coordinator/turn.ts';
import { diagnoseIce, gatherCandidates, type GatherPcCtor } from '../../src/comm/ice-check.ts';
import { loadNodePeer, nodeRtcConfig } from '../../src/comm/node.ts';
import { routeOfStats, type StatsLike } from '../../src/comm/route.ts';

const PORT = 34_780 + (process.pid % 200);
let relay: TurnRelay;
let Gather: GatherPcCtor;
let Pc: new (c: RTCConfiguration) => RTCPeerConnection;

beforeAll(async () => {
  await loadNodePeer();
  Pc = (globalThis as unknown as { RTCPeerConnection: typeof Pc }).RTCPeerConnection;
  Gather = Pc as unknown as GatherPcCtor;
  relay = await startTurnRelay({ port: PORT, relayPorts: [PORT + 1000, PORT + 1100], allowLoopbackPeers: true });
});
afterAll(async () => relay?.close());

const servers = (peer: string, secret: string) => [{ urls: [`turn:127.0.0.1:${PORT}?transport=udp`], ...turnCredentials(secret, peer, 600) }];

describe('coturn with short-lived credentials', () => {
  it('writes the secret into a config file, never a fixed user', () => {
    const c = turnConfig({ port: 3478, relayPorts: [49160, 49359], secret: 'S', maxBps: 0, pidFile: '/tmp/p', allowLoopbackPeers: false });
    expect(c).toContain('use-auth-secret\nstatic-auth-secret=S');
    expect(c).not.toMatch(/^user=/m);
    expect(c).not.toContain('allow-loopback-peers');
  });

  it('two peers that may only use relayed candidates connect through it and exchange data', async () => {
    const mk = (id: string) => new Pc({ ...nodeRtcConfig(servers(id, relay.secret)), iceTransportPolicy: 'relay' });
    const a = mk('a'), b = mk('b');
    try {
      a.onicecandidate = (e) => { if (e.candidate) void b.addIceCandidate(e.candidate); };
      b.onicecandidate = (e) => { if (e.candidate) void a.addIceCandidate(e.candidate); };
      const dc = a.createDataChannel('x');
      const got = new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no message through the relay within 10 s')), 10_000);
        b.ondatachannel = (e) => { e.channel.onmessage = (m) => { clearTimeout(t); resolve(String(m.data)); }; };
      });
      dc.onopen = () => dc.send('through the relay');
      const offer = await a.createOffer(); await a.setLocalDescription(offer); await b.setRemoteDescription(offer);
      const answer = await b.createAnswer(); await b.setLocalDescription(answer); await a.setRemoteDescription(answer);
      expect(await got).toBe('through the relay');
      expect(routeOfStats(await a.getStats() as unknown as StatsLike, ['127.0.0.1'])).toBe('relayed');
    } finally {
      a.close(); b.close();
    }
  });

  it('refuses credentials made with another secret; the self-check names the relay', async () => {
    const before = relay.authFailures.length;
    const bad = servers('p-bad', 'not-the-secret');
    const report = await gatherCandidates(Gather, nodeRtcConfig(bad), 4000);
    expect(report.relay).toEqual([]);
    expect(diagnoseIce(bad, report).join('\n')).toContain(`TURN relay at 127.0.0.1:${PORT}`);
    const good = await gatherCandidates(Gather, nodeRtcConfig(servers('p-good', relay.secret)), 4000);
    expect(good.relay.length).toBeGreaterThan(0);
    expect(relay.authFailures.length).toBeGreaterThan(before);
  });

  it('says what to do when coturn is missing or its port is taken', async () => {
    await expect(startTurnRelay({ binary: '/nonexistent/turnserver' })).rejects.toThrow(/npm run setup/);
    const second = startTurnRelay({ port: PORT, relayPorts: [PORT + 1200, PORT + 1300] });
    await expect(second).rejects.toBeInstanceOf(TurnError);
    await expect(second).rejects.toThrow(new RegExp(`port ${PORT}`));
  }, 30_000);
});
