// A mixed ring: one Chromium tab computing with WebGPU, one Chromium tab computing with the
// wasm SIMD engine, and one Node volunteer on Dawn's WebGPU train the same job together. Their
// forward and backward passes round differently, but the all-reduce gives each the same
// gradient sum and the optimiser step runs in one agreed implementation (src/optim/host.ts),
// so after EVERY step the three weight checksums are identical (the coordinator would evict a
// dissenter: none is). The job ends close to the same job trained by one WebGPU peer alone.
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPage } from '../../coordinator/main.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';
import {
  abortsText, buildTestData, finalWeights, lossAborts, metricsOf, onePeerWeights, startTestJob, tempRoot, testJob, volunteer, type TestJob,
} from '../../testbed/jobs.ts';
import { launchChromium, type LaunchedBrowser } from '../../testbed/chromium.ts';

const K = 8;
let root: { dir: string; remove(): Promise<void> };
let data: Awaited<ReturnType<typeof buildTestData>>;
let pageDir: string;
let browser: LaunchedBrowser;

beforeAll(async () => {
  root = await tempRoot('mixed');
  data = await buildTestData(root.dir);
  pageDir = await buildPage(join(root.dir, 'page'));
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await root?.remove();
});

async function openVolunteer(job: TestJob, name: string, backend: 'webgpu' | 'wasm'): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${job.url}/?name=${name}&backend=${backend}`);
  await page.waitForFunction(
    () => document.getElementById('donate')?.dataset.device !== undefined && document.getElementById('donate')?.dataset.probing === '',
    undefined, { timeout: 180_000 },
  );
  expect(await page.evaluate(() => document.getElementById('donate')!.dataset.backend), (await page.textContent('#device')) ?? '').toBe(backend);
  await page.click('#toggle');
  return page;
}

describe('mixed ring', () => {
  it(`WebGPU tab + wasm tab + Node peer: identical weight checksums after each of ${K} steps`, async () => {
    const job = await startTestJob(root.dir, 'mixed', data, testJob(K, { minPeers: 3 }), { pageDir });
    try {
      const gpuTab = await openVolunteer(job, 'tab-webgpu', 'webgpu');
      const wasmTab = await openVolunteer(job, 'tab-wasm', 'wasm');
      const node = volunteer(job.url, 'node-webgpu', 'webgpu');
      await job.driver.finished;
      for (const p of [gpuTab, wasmTab]) {
        await p.waitForFunction(() => document.getElementById('donate')?.dataset.state === 'done', undefined, { timeout: 60_000 });
      }
      await node.exited;

      const records: MetricRecord[] = await metricsOf(job.jobDir);
      const steps = latestPerStep(records);
      expect(steps.map((r) => r.step)).toEqual(Array.from({ length: K }, (_, i) => i + 1));
      const why = `aborts:\n${abortsText(records)}\ncoordinator:\n${job.lines.slice(-40).join('\n')}\nnode volunteer:\n${node.lines.slice(-40).join('\n')}`;
      for (const r of steps) {
        expect(r.ring, `ring of step ${r.step}; ${why}`).toBe(3);
        expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}: ${JSON.stringify(r.peers)}`).toBe(1);
      }
      expect(lossAborts(records), `no step was lost (no dissent, no eviction): ${abortsText(records)}`).toEqual([]);
      // The ring really was mixed: the peers reported their engines.
      const gens = records.filter((r): r is Extract<MetricRecord, { type: 'generation' }> => r.type === 'generation');
      const devices = gens.at(-1)!.peers!.map((p) => p.device).sort();
      expect(devices.filter((d) => d.startsWith('webgpu:')).length, devices.join(' | ')).toBe(2);
      expect(devices.filter((d) => d.startsWith('wasm:')).length, devices.join(' | ')).toBe(1);
      const mixed = await finalWeights(job.jobDir);
      expect(mixed.step).toBe(K);

      // The same job trained by one WebGPU peer alone: the same weights up to float32 rounding.
      const ref = await onePeerWeights(root.dir, 'solo', data, testJob(K), 'webgpu');
      let maxW = 0, maxD = 0;
      for (let i = 0; i < ref.weights.length; i++) {
        maxW = Math.max(maxW, Math.abs(ref.weights[i]!));
        maxD = Math.max(maxD, Math.abs(ref.weights[i]! - mixed.weights[i]!));
      }
      console.log(`mixed ring (webgpu tab, wasm tab, node webgpu) vs 1 WebGPU peer after ${K} steps: max |dw| / max |w| = ${(maxD / maxW).toExponential(2)}`);
      expect(maxD / maxW, 'max |dw| / max |w| against one WebGPU peer').toBeLessThan(1e-4);
    } finally {
      await job.close();
    }
  }, 900_000);
});
