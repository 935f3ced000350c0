// Direct ring links across hosts (src/comm/direct-peer.ts): Node volunteers on hosts a, b and c
// of one LAN and one on host n behind a NAT that lets it reach only the coordinator's host. The
// three on the LAN link to each other over TLS over TCP; nobody is routed to n (its join came
// through the NAT, from none of its own addresses), and n's own direct dials time out and fall
// back to WebRTC through the coordinator's TURN relay. Then the
// LAN host whose two ring links are both direct is cut off (its cable pulled): noticed within
// seconds, training goes on, no step is lost or doubled, every step has one checksum, and the
// final weights are one peer's to float rounding.
import { describe, expect, it } from 'vitest';
import { netBed } from '../helpers/net-bed.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { LiveEvent, MetricRecord } from '../../src/protocol/messages.ts';
import { distanceFromOnePeer, metricsOf, peerNames, testJob } from '../../testbed/jobs.ts';
import { jobDirOf, startCoordinatorIn, volunteerIn } from '../../testbed/net/scenario.ts';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';

const K = 10;
/** Not a checkpoint step (testJob: every 4): a host uploading one may stay silent up to firstSilentMs, which is not what is measured here. */
const CUT_AFTER = 5;
const net = netBed('direct-links', { hosts: ['coord', 'a', 'b', 'c'], nat: { host: 'n', onlyTo: ['coord'] } });

type StepRecord = Extract<MetricRecord, { type: 'step' }>;

describe('direct links across hosts', () => {
  it(`a, b, c on a LAN link over TLS, n behind a NAT over the relay; a LAN host cut after step ${CUT_AFTER}: noticed, nothing lost`, async () => {
    const jobDir = jobDirOf(net.dir, 'direct');
    const coord = await startCoordinatorIn(net.bed, 'coord', {
      jobDir, dataDir: net.data.dataDir, dataset: 'mnist', config: testJob(K, { minPeers: 4 }), port: 8460, heartbeatMs: 1000,
      turn: { port: 3490, relayPorts: [49860, 49959] }, timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 4000 },
    });
    const url = `http://${net.bed.host('coord').ip}:${coord.port}`;
    const peers: LocalVolunteer[] = [];
    try {
      peers.push(...['a', 'b', 'c', 'n'].map((h) => volunteerIn(net.bed, h, url)));
      await coord.waitFor((e) => e.type === 'step' && e.peers === 4, 180_000, 'a first step with all 4 hosts');
      await coord.waitFor((e) => e.type === 'step' && e.step === CUT_AFTER, 120_000, `step ${CUT_AFTER}`);
      // The LAN host in the middle of the three in a row (n takes one place of four): both its links are direct TLS links.
      const gen = [...coord.events].reverse().find((x) => x.e.type === 'generation')!.e as Extract<LiveEvent, { type: 'generation' }>;
      const ring = gen.ring.map((id) => gen.peers.find((p) => p.id === id)?.name ?? id);
      const cut = ring.find((h, i) => h !== 'n' && ring[(i + 1) % 4] !== 'n' && ring[(i + 3) % 4] !== 'n')!;
      const cutAt = Date.now();
      await net.bed.cut(cut);
      const noticed = await coord.waitFor(
        (e) => e.type === 'peer-left' || e.type === 'step-aborted' || (e.type === 'generation' && e.ring.length < 4), 30_000,
        `the coordinator noticing ${cut}'s cut link`, cutAt,
      ).catch(async (e: unknown) => {
        const steps = (latestPerStep(await metricsOf(jobDir)) as StepRecord[]).map((r) => `${r.step}:${r.peers.map((p) => p.link).join(',')}`);
        throw new Error(`${String(e)}\nsteps: ${steps.join(' ')}\n${coord.lines.slice(-30).join('\n')}`);
      });
      const noticeMs = noticed.at - cutAt;
      await coord.finished;
      const logs = peers.map((p) => p.lines.join('\n')).join('\n');
      console.log(`direct links: ring ${ring.join(' ')}; ${cut}'s cut noticed after ${noticeMs} ms (${noticed.e.type}); ` +
        `fallbacks logged: ${(logs.match(/over WebRTC from now on/g) ?? []).length}`);
      expect(noticeMs, 'a cut host is noticed within seconds').toBeLessThan(10_000);

      const records = await metricsOf(jobDir);
      const steps = latestPerStep(records) as StepRecord[];
      expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
      const names = peerNames(records);
      let tcpEdges = 0;
      for (const r of steps) {
        expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}`).toBe(1);
        const hosts = r.peers.map((p) => names.get(p.peerId)).sort();
        if (r.step <= CUT_AFTER) expect(hosts, `ring of step ${r.step}`).toEqual(['a', 'b', 'c', 'n']);
        if (r.step > CUT_AFTER + 2) expect(hosts, `ring of step ${r.step}`).not.toContain(cut);
        for (const [i, p] of r.peers.entries()) {
          const edge = [names.get(p.peerId), names.get(r.peers[(i + 1) % r.peers.length]!.peerId)];
          const what = `link ${edge.join('->')} in step ${r.step}`;
          // n is reached and reaches out only through the relay; the LAN hosts link directly over TLS.
          if (edge.includes('n')) expect(p.link, what).toBe('relayed');
          else {
            expect(p.link, what).toBe('tcp');
            tcpEdges++;
          }
        }
      }
      expect(tcpEdges, 'edges between LAN hosts ran over direct TLS links').toBeGreaterThan(0);
      // n's volunteer gave up its direct dial (its NAT lets it reach only coord) for WebRTC; nobody dialed n directly.
      const fellBack = (p: LocalVolunteer) => /direct link to \S+ at [\d.]+:\d+ (failed|closed before it opened).*over WebRTC/.test(p.lines.join('\n'));
      expect(peers.map(fellBack), 'a, b, c never fell back (no route to n); n did').toEqual([false, false, false, true]);

      // The same job on one peer (loopback, this host): the same weights up to float rounding.
      const d = await distanceFromOnePeer(net.dir, jobDir, net.data, K);
      console.log(`direct links vs one peer after ${K} steps: max |dw| / max |w| = ${d.toExponential(2)}`);
      expect(d).toBeLessThan(1e-4);
    } finally {
      for (const p of peers) p.kill('SIGKILL');
      await coord.stop();
    }
  }, 600_000);
});
