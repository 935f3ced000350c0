// The coordinator's side of direct ring links (coordinator/direct-links.ts): which routes a step
// assignment or announcement carries, to whom, with which key; and the protocol's checks of
// the fields involved (a join's port, the answer's secret, a message's routes).
import { describe, expect, it } from 'vitest';
import { DirectBook, dialableHost, successorsOf } from '../../coordinator/direct-links.ts';
import { directKey } from '../../src/comm/direct-key.ts';
import { planTopology, roleOf } from '../../src/comm/topology.ts';
import { decodeCoordinatorMessage, decodePeerMessage } from '../../src/protocol/decode.ts';
import { PROTOCOL_VERSION, type CoordinatorMessage, type StepAssignment } from '../../src/protocol/messages.ts';

const assignment = (ring: string[], rank: number): StepAssignment => ({
  type: 'step-assignment', job: 1, generation: 2, step: 3, ring, rank, globalBatch: 8, sampleIds: [1], epoch: 0, seed: 4,
});

describe('direct routes', () => {
  it('go to a listening member for its listening successor only, keyed by the successor\'s secret and the dialer', () => {
    const book = new DirectBook();
    const secret = { a: book.register('a', '::ffff:10.0.0.1', 7001), b: book.register('b', '10.0.0.2', 7002), d: book.register('d', 'fe80::1%eth0', 7004) };
    const ring = ['a', 'b', 'c', 'd'];
    const routed = (id: string) => book.routed(id, assignment(ring, ring.indexOf(id))) as StepAssignment;
    expect(routed('a').direct).toEqual({ b: { host: '10.0.0.2', port: 7002, key: directKey(secret.b, 'a').toString('base64url') } });
    // b's successor c is a browser (or a Node volunteer with --no-direct): WebRTC, no routes.
    expect(routed('b').direct).toBeUndefined();
    // c listens for nothing: it dials WebRTC, whatever its successor offers.
    expect(routed('c').direct).toBeUndefined();
    expect(routed('d').direct).toEqual({ a: { host: '10.0.0.1', port: 7001, key: directKey(secret.a, 'd').toString('base64url') } });
    // Announcements the same; other messages unchanged.
    const prepare: CoordinatorMessage = { type: 'prepare', id: 1, ring: ['d', 'b', 'a'] };
    expect((book.routed('b', prepare) as { direct?: unknown }).direct).toEqual({ a: expect.objectContaining({ port: 7001 }) });
    const done: CoordinatorMessage = { type: 'done', step: 1, reason: 'x' };
    expect(book.routed('a', done)).toBe(done);
    // A member that left is routed to by nobody.
    book.forget('b');
    expect(routed('a').direct).toBeUndefined();
    expect(dialableHost('::ffff:192.168.1.5')).toBe('192.168.1.5');
  });

  it('nobody is routed to a listener whose join came from none of its own addresses (a NAT between); it still dials out', () => {
    const book = new DirectBook();
    book.register('a', '::ffff:10.0.0.1', 7001, ['127.0.0.1', '10.0.0.1']);
    book.register('n', '10.0.0.254', 7009, ['127.0.0.1', '192.168.1.5']);
    book.register('b', 'FE80::2%eth0', 7002, ['fe80::2%eth1']);
    const ring = ['a', 'n', 'b'];
    const routes = (id: string) => book.routesFor(id, ring);
    expect(routes('a'), 'a -> n: n is behind a NAT').toBeNull();
    expect(Object.keys(routes('n') ?? {}), 'n -> b: n dials out').toEqual(['b']);
    expect(Object.keys(routes('b') ?? {}), 'b -> a').toEqual(['a']);
    expect(dialableHost('::1')).toBe('::1');
  });

  it('in a two-level generation name the successors in the group ring and in the column ring', () => {
    const ids = Array.from({ length: 16 }, (_, i) => `p${i}`);
    const topology = planTopology(ids.map((id) => ({ id })), { groups: 4 });
    const ring = topology.groups.flat();
    const book = new DirectBook();
    for (const id of ids) book.register(id, '127.0.0.1', 9000 + Number(id.slice(1)));
    for (const id of ids) {
      const role = roleOf(topology, id);
      const want = new Set([role.groupIds[(role.groupRank + 1) % role.groupIds.length]!]);
      if (role.columnIds) want.add(role.columnIds[(role.columnIds.indexOf(id) + 1) % role.columnIds.length]!);
      expect(new Set(successorsOf(ring, topology, id)), id).toEqual(want);
      const m = book.routed(id, { ...assignment(ring, ring.indexOf(id)), topology }) as StepAssignment;
      expect(new Set(Object.keys(m.direct ?? {})), id).toEqual(want);
      // What goes on the wire decodes on the volunteer's side.
      const d = decodeCoordinatorMessage(JSON.parse(JSON.stringify(m)));
      expect(d.ok && d.value.type === 'step-assignment' ? d.value.direct : null).toEqual(m.direct);
    }
    expect(successorsOf(['x'], undefined, 'x')).toEqual([]);
  });

  it('fields are checked at the boundary: a join\'s port, the answer\'s secret, a message\'s routes', () => {
    const version = PROTOCOL_VERSION;
    const okJoin = decodePeerMessage({ type: 'join', protocol: version, direct: { port: 7000 } });
    expect(okJoin.ok && okJoin.value.type === 'join' ? okJoin.value.direct : null).toEqual({ port: 7000 });
    for (const bad of [{ port: 0 }, { port: 70_000 }, { port: '80' }, { port: 80, host: 'x' }, 7]) {
      const d = decodePeerMessage({ type: 'join', protocol: version, direct: bad });
      expect(d.ok, JSON.stringify(bad)).toBe(false);
    }
    const route = { host: '10.0.0.2', port: 7002, key: 'A'.repeat(43) };
    const withDirect = (direct: unknown) => decodeCoordinatorMessage({ ...assignment(['a', 'b'], 0), direct });
    expect(withDirect({ b: route }).ok).toBe(true);
    for (const bad of [
      { b: { ...route, key: 'short' } }, { b: { ...route, host: 'a b' } }, { b: { ...route, port: 0 } }, { 'b c': route },
      { b: route, c: route, d: route, e: route }, [route],
    ]) expect(withDirect(bad).ok, JSON.stringify(bad)).toBe(false);
    const accept = {
      type: 'join-accept', peerId: 'a', signalingToken: 't', signalingPath: '/signal', job: 1, heartbeatMs: 1000, checkpointStep: null, iceServers: [],
    };
    expect(decodeCoordinatorMessage({ ...accept, directSecret: 'B'.repeat(43) }).ok).toBe(true);
    expect(decodeCoordinatorMessage({ ...accept, directSecret: 'B'.repeat(42) }).ok).toBe(false);
  });
});
