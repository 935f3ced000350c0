// Peers on different hosts train one job: a coordinator (STUN, coturn) on host `coord`, Node
// volunteers on hosts `a` and `b`, and one on host `n` behind a NAT that lets it reach only
// `coord`, so its links can only run through the TURN relay. Every committed step has the full
// ring and one checksum; `n`'s links are reported relayed, the others direct. Then `b`'s link
// is cut in the middle of training: it is noticed within seconds, the step runs again without
// it, no step is lost or doubled, and the final weights equal the same job trained by one peer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { MetricRecord } from '../../src/client/protocol.ts';
import { buildTestData, finalWeights, metricsOf, relDiff, startTestJob, tempRoot, testJob, volunteer } from '../distributed/helpers.ts';
import { Testbed } from './bed.ts';
import { jobDirOf, startCoordinatorIn, volunteerIn } from './scenario.ts';

const K = 10;
const CUT_AFTER = 5;
let root: { dir: string; remove(): Promise<void> };
let data: Awaited<ReturnType<typeof buildTestData>>;
let bed: Testbed;

beforeAll(async () => {
  root = await tempRoot('multihost');
  data = await buildTestData(root.dir);
  bed = await Testbed.create({ hosts: ['coord', 'a', 'b'], nat: { host: 'n', onlyTo: ['coord'] } });
});
afterAll(async () => {
  await bed?.close();
  await root?.remove();
});

type StepRecord = Extract<MetricRecord, { type: 'step' }>;

describe('across hosts', () => {
  it(`a, b and n (behind NAT, TURN only) train ${K} steps; b's link is cut after step ${CUT_AFTER}`, async () => {
    const jobDir = jobDirOf(root.dir, 'multi');
    const coord = await startCoordinatorIn(bed, 'coord', {
      jobDir, dataDir: data.dataDir, dataset: 'mnist', config: testJob(K, { minPeers: 3 }), port: 8443,
      turn: { port: 3478, relayPorts: [49160, 49359] }, heartbeatMs: 1000,
      timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 4000 },
    });
    const url = `http://${bed.host('coord').ip}:${coord.port}`;
    const peers = ['a', 'b', 'n'].map((h) => volunteerIn(bed, h, url));
    try {
      const t0 = Date.now();
      const formed = await coord.waitFor((e) => e.type === 'step' && e.peers === 3, 120_000, 'a first step with all 3 hosts');
      await coord.waitFor((e) => e.type === 'step' && e.step === CUT_AFTER, 120_000, `step ${CUT_AFTER}`);
      const cutAt = Date.now();
      await bed.cut('b');
      const noticed = await coord.waitFor((e) => e.type === 'peer-left' || e.type === 'step-aborted' || (e.type === 'generation' && e.ring.length === 2), 30_000, "the coordinator noticing b's cut link", cutAt);
      const noticeMs = noticed.at - cutAt;
      await coord.finished;
      console.log(`across hosts: first full ring after ${formed.at - t0} ms; b's cut noticed after ${noticeMs} ms (${noticed.e.type})`);
      expect(noticeMs, 'a cut host is noticed within seconds').toBeLessThan(10_000);

      const records = await metricsOf(jobDir);
      const steps = latestPerStep(records) as StepRecord[];
      expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
      const names = new Map<string, string>();
      for (const g of records) if (g.type === 'generation') for (const p of g.peers ?? []) names.set(p.id, p.name ?? p.id);
      for (const r of steps) {
        expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}`).toBe(1);
        const hosts = r.peers.map((p) => names.get(p.peerId));
        if (r.step <= CUT_AFTER) expect(hosts.sort(), `ring of step ${r.step}`).toEqual(['a', 'b', 'n']);
        else expect(hosts.sort(), `ring of step ${r.step}`).toEqual(['a', 'n']);
        // n reaches the others only through the relay; a <-> b is direct.
        for (const [i, p] of r.peers.entries()) {
          const next = r.peers[(i + 1) % r.peers.length]!;
          const edge = [names.get(p.peerId), names.get(next.peerId)];
          expect(p.link, `link ${edge.join('->')} in step ${r.step}`).toBe(edge.includes('n') ? 'relayed' : 'direct');
        }
      }
      const multi = await finalWeights(jobDir);
      expect(multi.step).toBe(K);

      // The same job on one peer (loopback, this host): the same weights up to float rounding.
      const solo = await startTestJob(root.dir, 'solo', data, testJob(K));
      try {
        const v = volunteer(solo.url, 'solo', 'wasm');
        await solo.driver.finished;
        await v.exited;
        const ref = await finalWeights(solo.jobDir);
        const d = relDiff(multi.weights, ref.weights);
        console.log(`across hosts vs one peer after ${K} steps: max |dw| / max |w| = ${d.toExponential(2)}`);
        expect(d).toBeLessThan(1e-4);
      } finally {
        await solo.close();
      }
    } finally {
      for (const p of peers) p.kill('SIGKILL');
      await coord.stop();
    }
  }, 600_000);
});
