// Link routes from WebRTC stats (Chromium's and node-datachannel's shapes) and the ICE
// self-check's diagnosis.
import { describe, expect, it } from 'vitest';
import { candidateOf, diagnoseIce, type IceReport } from '../../src/comm/ice-check.ts';
import { relayHostsOf, routeOfStats, type StatLike } from '../../src/comm/route.ts';

const map = (xs: StatLike[]) => new Map(xs.map((x) => [x.id!, x]));

describe('routeOfStats', () => {
  it('Chromium: the transport names the selected pair', () => {
    const s = map([
      { id: 'T', type: 'transport', selectedCandidatePairId: 'P2' },
      { id: 'P1', type: 'candidate-pair', localCandidateId: 'L1', remoteCandidateId: 'R1', nominated: true, state: 'succeeded' },
      { id: 'P2', type: 'candidate-pair', localCandidateId: 'L2', remoteCandidateId: 'R1' },
      { id: 'L1', type: 'local-candidate', candidateType: 'host', address: '10.0.0.2' },
      { id: 'L2', type: 'local-candidate', candidateType: 'relay', address: '10.0.0.1' },
      { id: 'R1', type: 'remote-candidate', candidateType: 'srflx', address: '10.0.0.3' },
    ]);
    expect(routeOfStats(s)).toBe('relayed');
    (s.get('T')!).selectedCandidatePairId = 'P1';
    expect(routeOfStats(s)).toBe('direct');
  });
  it('node-datachannel: one pair; a remote at a TURN host counts as relayed even when typed prflx', () => {
    const s = map([
      { id: 'P', type: 'candidate-pair', localCandidateId: 'L', remoteCandidateId: 'R', nominated: true, state: 'succeeded' },
      { id: 'L', type: 'local-candidate', candidateType: 'host', ip: '10.77.0.2' },
      { id: 'R', type: 'remote-candidate', candidateType: 'prflx', ip: '10.77.0.1' },
    ]);
    expect(routeOfStats(s)).toBe('direct');
    expect(routeOfStats(s, ['10.77.0.1'])).toBe('relayed');
  });
  it('null until a pair is selected', () => {
    expect(routeOfStats(map([{ id: 'P', type: 'candidate-pair', state: 'in-progress' }]))).toBeNull();
    expect(routeOfStats(new Map())).toBeNull();
  });
  it('relay hosts from TURN URLs', () => {
    expect(
      relayHostsOf([{ urls: ['stun:a:1'] }, { urls: ['turn:10.0.0.1:3478?transport=udp', 'turns:[fd00::1]:5349', 'turn:relay.example.org'] }]),
    ).toEqual(['10.0.0.1', 'fd00::1', 'relay.example.org']);
  });
});

describe('ICE self-check diagnosis', () => {
  const servers = [{ urls: ['stun:10.77.0.1:8080'] }, { urls: ['turn:10.77.0.1:3478?transport=udp'], username: 'u', credential: 'c' }];
  const report = (p: Partial<IceReport>): IceReport => ({ host: [], srflx: [], relay: [], errors: [], complete: true, ...p });
  it('parses candidate lines', () => {
    expect(candidateOf('candidate:1 1 UDP 2122317823 10.77.0.2 50000 typ host')).toEqual({ type: 'host', address: '10.77.0.2:50000' });
    expect(candidateOf('a=candidate:4 1 UDP 1047807 10.77.0.1 49248 typ relay raddr 0.0.0.0 rport 0')).toEqual({ type: 'relay', address: '10.77.0.1:49248' });
    expect(candidateOf('garbage')).toBeNull();
  });
  it('says nothing when STUN and TURN both answered', () => {
    expect(diagnoseIce(servers, report({ host: ['10.77.0.2:1'], srflx: ['10.77.0.2:1'], relay: ['10.77.0.1:49200'] }))).toEqual([]);
  });
  it('names the server and what to check when STUN or TURN fails', () => {
    const silent = diagnoseIce(servers, report({ host: ['192.168.1.2:1'] }));
    expect(silent.join('\n')).toContain('no answer from STUN at 10.77.0.1:8080');
    expect(silent.join('\n')).toContain('TURN relay at 10.77.0.1:3478 gave no relayed address');
    const refused = diagnoseIce(
      servers, report({ host: ['h:1'], srflx: ['s:1'], errors: [{ url: 'turn:10.77.0.1:3478?transport=udp', code: 401, text: 'Unauthorized' }] }),
    );
    expect(refused.join('\n')).toContain('refused this device\'s credentials');
    expect(diagnoseIce([], report({ host: ['h:1'] })).join('\n')).toContain('--turn');
    expect(diagnoseIce(servers, report({})).join('\n')).toContain('default route');
  });
});
