// The multi-host scenario of `npm run bench -- network` (the same parts as
// test/net/multihost.test.ts): a coordinator with STUN and coturn on host `coord`, a Node
// volunteer on host `a` and one on host `n` behind a NAT that reaches only `coord`. Did n train
// through the TURN relay (its links reported relayed, every step one checksum)? And does a
// Chromium page on host `page`, opened by the coordinator's LAN address over HTTPS with the CA
// imported, get WebGPU (a secure context with an adapter)?
import { latestPerStep } from '../coordinator/metrics.ts';
import type { MetricRecord } from '../src/protocol/messages.ts';
import { buildTestData, metricsOf, tempRoot, testJob } from '../testbed/jobs.ts';
import { Testbed } from '../testbed/net/bed.ts';
import { jobDirOf, startCoordinatorIn, volunteerIn } from '../testbed/net/scenario.ts';
import { launchChromiumIn } from '../testbed/net/browser.ts';
import { extraCaFile } from '../coordinator/tls.ts';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface ScenarioResult {
  hosts: number;
  natRelayed: boolean;
  /** null: not measured in this run (see lanPageNote). */
  lanPageWebGpu: boolean | null;
  lanPageNote: string;
  /** From the first generation to its first committed step, ms. */
  ringFormMs: number | null;
  steps: number;
}

const STEPS = 4;

export async function runNetworkScenario(): Promise<ScenarioResult> {
  const root = await tempRoot('netbench');
  const bed = await Testbed.create({ hosts: ['coord', 'a', 'page'], nat: { host: 'n', onlyTo: ['coord'] } });
  try {
    const data = await buildTestData(root.dir);
    const jobDir = jobDirOf(root.dir, 'scenario');
    const tlsDir = join(root.dir, 'tls');
    const coord = await startCoordinatorIn(bed, 'coord', {
      jobDir, dataDir: data.dataDir, dataset: 'mnist', config: testJob(STEPS, { minPeers: 2 }), port: 8443, tlsDir,
      turn: { port: 3478, relayPorts: [49160, 49359] }, heartbeatMs: 1000,
    });
    const url = `https://${bed.host('coord').ip}:${coord.port}`;
    const caPem = await readFile(join(tlsDir, 'ca.crt'), 'utf8');
    const lanPageWebGpu = await pageHasWebGpu(bed, url, caPem);
    const env = { NODE_EXTRA_CA_CERTS: await extraCaFile(tlsDir, caPem) };
    const peers = ['a', 'n'].map((h) => volunteerIn(bed, h, url, [], env));
    try {
      const gen = await coord.waitFor((e) => e.type === 'generation' && e.ring.length === 2, 120_000, 'a ring of a and n');
      const first = await coord.waitFor((e) => e.type === 'step', 120_000, 'the first step', gen.at);
      await Promise.race([coord.finished, new Promise((_, rej) => setTimeout(() => rej(new Error('scenario did not finish in 5 minutes')), 300_000))]);
      const records: MetricRecord[] = await metricsOf(jobDir);
      const steps = latestPerStep(records) as Extract<MetricRecord, { type: 'step' }>[];
      const natRelayed = steps.length === STEPS
        && steps.every((s) => s.ring === 2 && new Set(s.peers.map((p) => p.checksum)).size === 1 && s.peers.every((p) => p.link === 'relayed'));
      return {
        hosts: 5, natRelayed, lanPageWebGpu,
        lanPageNote: 'Chromium on host page, https://<coordinator LAN address>, CA in its NSS store: secure context, navigator.gpu and an adapter',
        ringFormMs: first.at - gen.at, steps: steps.length,
      };
    } finally {
      for (const p of peers) p.kill('SIGKILL');
      await coord.stop();
    }
  } finally {
    await bed.close();
    await root.remove();
  }
}

/** Chromium on host `page` opens the coordinator by LAN address over HTTPS: secure, with a WebGPU adapter? */
async function pageHasWebGpu(bed: Testbed, url: string, caPem: string): Promise<boolean> {
  const chrome = await launchChromiumIn(bed, 'page', caPem);
  try {
    const page = await (await chrome.browser.newContext()).newPage();
    await page.goto(`${url}/`);
    return await page.evaluate(async () => {
      if (!isSecureContext || !('gpu' in navigator)) return false;
      const adapter = await navigator.gpu.requestAdapter({ featureLevel: 'compatibility' } as GPURequestAdapterOptions);
      return adapter !== null;
    });
  } finally {
    await chrome.close();
  }
}
