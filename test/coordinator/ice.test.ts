// ICE servers for volunteers: --ice parsing, TURN REST credentials (checked by a real coturn
// in turn.test.ts), per-peer server lists, the STUN codec and server, blame for unreachable
// peers, join addresses.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { FORM_AGAIN_WINDOW_MS, blameUnreachable, formAgain } from '../../coordinator/blame.ts';
import { checkIcePlan, hostOfHeader, iceServersFor, parseIceList, parseIceUrl, turnCredentials } from '../../coordinator/ice.ts';
import { joinUrls, lanAddresses } from '../../coordinator/addresses.ts';
import { bindingRequest, bindingSuccess, isBindingRequest, parseBindingSuccess, startStunServer, stunQuery } from '../../coordinator/stun.ts';

describe('--ice', () => {
  it('parses STUN and TURN URLs with credentials and transport', () => {
    expect(parseIceList('stun:stun.example.org:3478, turn:alice:s%2Fecret@10.0.0.1:3478?transport=tcp,turns:[2001:db8::1]:5349')).toEqual([
      { url: 'stun:stun.example.org:3478' },
      { url: 'turn:10.0.0.1:3478?transport=tcp', username: 'alice', credential: 's/ecret' },
      { url: 'turns:[2001:db8::1]:5349' },
    ]);
  });
  it.each([
    ['http://x:1', 'scheme must be stun:'],
    ['stun:', 'is not HOST or HOST:PORT'],
    ['stun:a:99999', 'out of range'],
    ['stun:u:p@host', 'STUN takes no credentials'],
    ['turn:user@host:3478', 'USER:PASSWORD'],
    ['turn:host:3478?foo=1', 'only query allowed'],
    ['turn:host name:3478', 'is not HOST'],
  ])('refuses %s, saying what is wrong', (entry, why) => {
    expect(() => parseIceUrl(entry)).toThrow(why);
    expect(() => parseIceUrl(entry)).toThrow(`"${entry}"`);
  });
  it('refuses an empty list and a TURN server with no way to get credentials', () => {
    expect(() => parseIceList(' , ')).toThrow('--ice is empty');
    expect(() => checkIcePlan({ external: parseIceList('turn:relay.example.org:3478') })).toThrow('--ice-secret');
    expect(() => checkIcePlan({ external: parseIceList('turn:relay.example.org:3478'), externalSecret: 's' })).not.toThrow();
  });
});

describe('TURN REST credentials', () => {
  it('are <expiry>:<peer> and base64 HMAC-SHA1 of it, expiring after the ttl', () => {
    const now = Date.UTC(2026, 10, 23, 12);
    const c = turnCredentials('secret', 'p-1', 3600, now);
    expect(c.username).toBe(`${now / 1000 + 3600}:p-1`);
    expect(c.credential).toBe(createHmac('sha1', 'secret').update(c.username).digest('base64'));
    expect(turnCredentials('other', 'p-1', 3600, now).credential).not.toBe(c.credential);
  });
  it('each peer gets its own servers at the address it reached the coordinator by', () => {
    const plan = {
      stunPort: 8080, turn: { port: 3478, secret: 's' }, external: parseIceList('stun:stun.example.org:3478,turn:u:p@r.example.org'), ttlSeconds: 600,
    };
    const a = iceServersFor(plan, '10.77.0.1', 'p-1', 0);
    expect(a[0]).toEqual({ urls: ['stun:10.77.0.1:8080'] });
    expect(a[1]!.urls).toEqual(['turn:10.77.0.1:3478?transport=udp', 'turn:10.77.0.1:3478?transport=tcp']);
    expect(a[1]!.username).toBe('600:p-1');
    expect(a.slice(2)).toEqual([{ urls: ['stun:stun.example.org:3478'] }, { urls: ['turn:r.example.org'], username: 'u', credential: 'p' }]);
    expect(iceServersFor(plan, 'fd00::5', 'p-2', 0)[0]).toEqual({ urls: ['stun:[fd00::5]:8080'] });
    expect(iceServersFor({}, 'x', 'p', 0)).toEqual([]);
  });
  it('reads the Host header', () => {
    expect(hostOfHeader('10.77.0.1:8080')).toBe('10.77.0.1');
    expect(hostOfHeader('[fd00::1]:8080')).toBe('fd00::1');
    expect(hostOfHeader('lab.local')).toBe('lab.local');
    expect(hostOfHeader('evil/x')).toBeNull();
    expect(hostOfHeader(undefined)).toBeNull();
  });
});

describe('STUN', () => {
  it('answers a binding request with the XOR-mapped address (IPv4 and IPv6), and ignores other messages', () => {
    const req = bindingRequest();
    expect(isBindingRequest(req)).toBe(true);
    expect(isBindingRequest(req.subarray(0, 19))).toBe(false);
    const bad = req.slice(); bad[4] = 0; // no magic cookie
    expect(isBindingRequest(bad)).toBe(false);
    for (const from of [{ family: 4 as const, address: '192.168.77.2', port: 40000 }, { family: 6 as const, address: '2001:db8:0:0:0:0:0:1', port: 1 }]) {
      const res = bindingSuccess(req, from);
      const got = parseBindingSuccess(res, req);
      expect(got).toEqual(from.family === 4 ? from : { ...from, address: '2001:db8:0:0:0:0:0:1' });
      expect(parseBindingSuccess(res, bindingRequest())).toBeNull(); // another transaction
    }
    expect(parseBindingSuccess(bindingSuccess(req, { family: 6, address: '::ffff:10.0.0.1', port: 5 }), req)?.address).toBe('0:0:0:0:0:ffff:a00:1');
  });
  it('a real UDP server tells a client its address; a silent port times out', async () => {
    const server = await startStunServer('127.0.0.1', 0 + 47_000 + (process.pid % 1000));
    try {
      const a = await stunQuery('127.0.0.1', server.port, 2000);
      expect(a).toMatchObject({ family: 4, address: '127.0.0.1' });
      expect(server.answered()).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
    const t0 = Date.now();
    expect(await stunQuery('127.0.0.1', server.port, 400)).toBeNull();
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});

describe('blame for a ring that could not form, or failed as it formed', () => {
  it('the peer in most failed edges; ties go to the newest member', () => {
    // x cannot reach anyone: both its neighbours and x itself report.
    expect(blameUnreachable(['a', 'x', 'b', 'c'], [['a', 'x'], ['x', 'b'], ['b', 'x']])).toBe('x');
    // x reports first, blaming an honest neighbour: still x.
    expect(blameUnreachable(['a', 'b', 'x'], [['x', 'a'], ['b', 'x']])).toBe('x');
    // A ring of two: a tie; the newcomer goes.
    expect(blameUnreachable(['a', 'new'], [['a', 'new'], ['new', 'a']])).toBe('new');
    // Reports naming strangers count only for members.
    expect(blameUnreachable(['a', 'b'], [['a', 'zz']])).toBe('a');
  });

  it("formAgain: a closed or silent link in a generation's first step, once per window; never a bad frame, never later", () => {
    const t = 1_000_000;
    expect(formAgain('peer-closed', true, undefined, t)).toBe(true);
    expect(formAgain('peer-timeout', true, undefined, t)).toBe(true);
    for (const kind of ['bad-frame', 'stale', 'stalled', 'bad-input', 'aborted', 'connect-failed', 'closed'] as const)
      expect(formAgain(kind, true, undefined, t), kind).toBe(false);
    expect(formAgain('peer-closed', false, undefined, t)).toBe(false);
    expect(formAgain('peer-closed', true, t - FORM_AGAIN_WINDOW_MS + 1, t)).toBe(false);
    expect(formAgain('peer-closed', true, t - FORM_AGAIN_WINDOW_MS, t)).toBe(true);
  });
});

describe('join addresses', () => {
  const ifaces = {
    lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }],
    eth0: [
      { address: '10.77.0.1', family: 'IPv4', internal: false }, { address: 'fe80::1', family: 'IPv6', internal: false },
      { address: 'fd00::1', family: 'IPv6', internal: false },
    ],
    wlan0: [{ address: '192.168.1.20', family: 'IPv4', internal: false }],
  } as unknown as Parameters<typeof lanAddresses>[0];
  it('lists every non-loopback address, IPv4 first, no link-local', () => {
    expect(lanAddresses(ifaces)).toEqual(['10.77.0.1', '192.168.1.20', 'fd00::1']);
  });
  it('a wildcard listen gives a URL per address and the .local name; a named host only itself', () => {
    expect(joinUrls('0.0.0.0', 8080, true, '', lanAddresses(ifaces), 'labpc')).toEqual([
      'https://10.77.0.1:8080/', 'https://192.168.1.20:8080/', 'https://[fd00::1]:8080/', 'https://labpc.local:8080/',
    ]);
    expect(joinUrls('127.0.0.1', 8080, false, '', [], 'x')).toEqual(['http://127.0.0.1:8080/']);
  });
});
