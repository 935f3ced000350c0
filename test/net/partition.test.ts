// A link cut between two hosts that both still reach the coordinator (testbed/net/bed.ts
// partition: a broken switch port, a firewall rule). Node volunteers on hosts a, b and c of one
// LAN train in a ring of direct TLS links; after step CUT_AFTER the path between a and b drops
// every packet. Neither session goes silent, so the coordinator sees nothing; the ring must
// notice by itself, within the dead time the coordinator gives each assignment (StepAssignment
// .deadMs: the longest silence it allows a member, plus a margin: a few seconds here), not at
// the volunteers' own 120 s. Then training goes on (a and b meet again through the coordinator's
// TURN relay, or one of them waits out), no step is lost or doubled, every step has one checksum,
// and the final weights are one peer's to float rounding.
import { describe, expect, it } from 'vitest';
import { netBed } from '../helpers/net-bed.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';
import { distanceFromOnePeer, metricsOf, peerNames, testJob } from '../../testbed/jobs.ts';
import { jobDirOf, startCoordinatorIn, volunteerIn } from '../../testbed/net/scenario.ts';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';

const K = 10;
/**
 * The cut comes after the first step from this one that committed once step 4's checkpoint was stored (testJob: every 4):
 * a step assigned while that upload runs gives the ring the uploader's silence allowance, firstSilentMs (30 s), as its dead
 * time. With fast steps the upload outlasted step 5 in about 1 run of 3 here (noticed after 32.6-33.1 s).
 */
const CUT_AFTER = 5;
const CHECKPOINT = 4;
const net = netBed('partition', { hosts: ['coord', 'a', 'b', 'c'] });

type StepRecord = Extract<MetricRecord, { type: 'step' }>;

describe('a link cut between two hosts that both reach the coordinator', () => {
  it(`a-b cut after step ${CUT_AFTER} or later: the ring notices within its dead time, training goes on, nothing lost`, async () => {
    const jobDir = jobDirOf(net.dir, 'partition');
    const coord = await startCoordinatorIn(net.bed, 'coord', {
      jobDir, dataDir: net.data.dataDir, dataset: 'mnist', config: testJob(K, { minPeers: 3 }), port: 8462, heartbeatMs: 1000,
      turn: { port: 3492, relayPorts: [49960, 50059] }, timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 4000 },
    });
    const url = `http://${net.bed.host('coord').ip}:${coord.port}`;
    const peers: LocalVolunteer[] = [];
    try {
      peers.push(...['a', 'b', 'c'].map((h) => volunteerIn(net.bed, h, url)));
      await coord.waitFor((e) => e.type === 'step' && e.peers === 3, 180_000, 'a first step with all 3 hosts');
      const stored = await coord.waitFor((e) => e.type === 'checkpoint' && e.step === CHECKPOINT, 120_000, `checkpoint ${CHECKPOINT} stored`);
      const last = await coord.waitFor((e) => e.type === 'step' && e.step >= CUT_AFTER, 120_000, `a step from ${CUT_AFTER} on after the checkpoint`,
        stored.at);
      const cutAfter = last.e.type === 'step' ? last.e.step : CUT_AFTER;
      expect(cutAfter, 'steps left after the cut').toBeLessThan(K - 1);
      const cutAt = Date.now();
      await net.bed.partition('a', 'b');
      const noticed = await coord.waitFor((e) => e.type === 'step-aborted' || e.type === 'peer-left' || e.type === 'generation', 60_000,
        'the ring noticing the cut between a and b', cutAt);
      const noticeMs = noticed.at - cutAt;
      await coord.finished;
      const why = noticed.e.type === 'step-aborted' ? `: ${noticed.e.reason}` : '';
      console.log(`partition: a-b cut after step ${cutAfter}, noticed after ${noticeMs} ms (${noticed.e.type}${why})`);
      // The dead time here: 4 x ~1 s heartbeat gaps or silentMs (4 s), plus the 2 s margin; the volunteers' own is 120 s.
      expect(noticeMs, 'a cut between two live hosts is noticed within the ring\'s dead time').toBeLessThan(20_000);

      const records = await metricsOf(jobDir);
      const steps = latestPerStep(records) as StepRecord[];
      const names = peerNames(records);
      // Every step committed once, each with one checksum; direct links all round before the cut.
      expect(steps.map((r) => `${r.step}:${new Set(r.peers.map((p) => p.checksum)).size}`)).toEqual(Array.from({ length: K }, (_, i) => `${i + 1}:1`));
      const before = steps.filter((r) => r.step <= cutAfter).flatMap((r) => r.peers.map((p) => p.link));
      expect(new Set(before), 'direct links before the cut').toEqual(new Set(['tcp']));
      const after = steps.filter((r) => r.step > cutAfter + 1).map((r) => r.peers.map((p) => `${names.get(p.peerId)}:${p.link}`).join(' '));
      console.log(`partition: rings after the cut: ${after.join(' | ')}`);

      const d = await distanceFromOnePeer(net.dir, jobDir, net.data, K);
      console.log(`partition vs one peer after ${K} steps: max |dw| / max |w| = ${d.toExponential(2)}`);
      expect(d).toBeLessThan(1e-4);
    } finally {
      for (const p of peers) p.kill('SIGKILL');
      await coord.stop();
    }
  }, 600_000);
});
