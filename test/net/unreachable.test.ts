// A volunteer nobody can reach (behind a NAT that lets it reach only the coordinator's host, and
// the job has no TURN relay): the coordinator blames it, not its honest neighbours, and after
// three such rings it leaves with a message that says why, instead of being evicted and
// rejoining in a loop. The two volunteers that can reach each other train on. The job gives its
// rings 6 s to form (ringFormMs; 15 s by default): links between these hosts open in well under one.
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { netBed } from '../helpers/net-bed.ts';
import { extraCaFile } from '../../coordinator/tls.ts';
import { peerNames, testJob } from '../../testbed/jobs.ts';
import { jobDirOf, startCoordinatorIn, volunteerIn } from '../../testbed/net/scenario.ts';

const net = netBed('unreachable', { hosts: ['coord', 'a', 'b'], nat: { host: 'n', onlyTo: ['coord'] } });

describe('a volunteer nobody can reach', () => {
  it('is blamed itself, and leaves after three rings with a diagnosis', async () => {
    const tlsDir = join(net.dir, 'tls');
    const coord = await startCoordinatorIn(net.bed, 'coord', {
      jobDir: jobDirOf(net.dir, 'job'), dataDir: net.data.dataDir, dataset: 'mnist',
      config: testJob(400, { minPeers: 2, checkpointEvery: 2, ringFormMs: 6000 }),
      port: 8443, tlsDir,
      heartbeatMs: 1000, timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 10_000 },
    });
    const url = `https://${net.bed.host('coord').ip}:${coord.port}`;
    const env = { NODE_EXTRA_CA_CERTS: await extraCaFile(tlsDir, await readFile(join(tlsDir, 'ca.crt'), 'utf8')) };
    const a = volunteerIn(net.bed, 'a', url, [], env);
    const b = volunteerIn(net.bed, 'b', url, [], env);
    let n: ReturnType<typeof volunteerIn> | null = null;
    try {
      await coord.waitFor((e) => e.type === 'step' && e.peers === 2, 120_000, 'a and b training');
      n = volunteerIn(net.bed, 'n', url, [], env);
      const code = await Promise.race([n.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 240_000))]);
      const log = n.lines.join('\n');
      console.log(`what the unreachable volunteer said:\n${n.lines.slice(-6).join('\n')}`);
      expect(code, log.slice(-2000)).not.toBe('timeout');
      expect(code).not.toBe(0);
      expect(log).toContain('could not open a WebRTC connection to any other volunteer');
      expect(log).toMatch(/WebRTC addresses of this device: host 192\.168\.\d+\.2:\d+/);
      expect(log).toMatch(/--turn/);
      // Only n was ever blamed: a and b were never evicted, and they train on.
      const left = coord.events.filter((x) => x.e.type === 'peer-left').map((x) => (x.e.type === 'peer-left' ? x.e : null)!);
      const names = peerNames(coord.events.map((x) => x.e));
      expect(left.length).toBeGreaterThanOrEqual(3);
      for (const l of left) expect(names.get(l.peerId), `${l.peerId}: ${l.reason}`).toBe('n');
      const since = Date.now();
      await coord.waitFor((e) => e.type === 'step' && e.peers === 2, 60_000, 'a and b still training', since);
    } finally {
      for (const v of [a, b, n]) v?.kill('SIGKILL');
      await coord.stop();
    }
  }, 400_000);
});
