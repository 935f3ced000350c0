// syncEvery "auto" on a real slow link: three volunteers on their own hosts of the network test
// bed, their LAN shaped as one shared 100 Mbit/s Wi-Fi medium (testbed/net/profiles.ts). The ring
// starts with exact sync steps, measures that the all-reduce dominates them, and goes to rounds
// of 8 at a round boundary, with every peer told in its assignment; every step and round is
// committed once, every peer holds the same weights after each, and the sync steps before the
// switch are sync SGD (the weights after them equal one peer's within float32 rounding). A
// Chromium on a fifth host opens the dashboard and reads the choice and its reason there
// (a screenshot goes to test-output/dashboard-sync-auto.png).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCheckpointStore } from '../../coordinator/checkpoints.ts';
import { decodeCheckpoint } from '../../src/checkpoint/format.ts';
import { buildTestData, metricsOf, onePeerWeights, relDiff, tempRoot, testJob } from '../../testbed/jobs.ts';
import { buildPage } from '../../coordinator/main.ts';
import { launchChromiumIn } from '../../testbed/net/browser.ts';
import { Testbed } from '../../testbed/net/bed.ts';
import { jobDirOf, startCoordinatorIn, volunteerIn } from '../../testbed/net/scenario.ts';

let root: { dir: string; remove(): Promise<void> };
let data: Awaited<ReturnType<typeof buildTestData>>;
let bed: Testbed;
let pageDir: string;

beforeAll(async () => {
  root = await tempRoot('sync-auto');
  data = await buildTestData(root.dir);
  pageDir = await buildPage(join(root.dir, 'page'));
  bed = await Testbed.create({ hosts: ['coord', 'a', 'b', 'c', 'watch'], profile: 'wifi' });
});
afterAll(async () => {
  await bed?.close();
  await root?.remove();
});

describe('syncEvery "auto" on a shared Wi-Fi medium', () => {
  it('measures sync steps, goes to rounds of 8 at a round boundary, and commits every step once with one checksum', async () => {
    const AUTO = { syncEvery: 'auto', momentumCarry: 0.75, outerLr: 1, outerMomentum: 0 };
    const jobDir = jobDirOf(root.dir, 'job');
    // 4 sync steps (the first is not measured), then rounds of 8: 36 steps.
    const coord = await startCoordinatorIn(bed, 'coord', {
      jobDir, dataDir: data.dataDir, dataset: 'mnist', config: testJob(36, { minPeers: 3, ...AUTO }), port: 8080, pageDir,
      heartbeatMs: 1000, timeouts: { stepMs: 120_000, admitMs: 120_000, silentMs: 30_000 },
    });
    const url = `http://${bed.host('coord').ip}:${coord.port}`;
    const vs = ['a', 'b', 'c'].map((h) => volunteerIn(bed, h, url));
    let dashboard = '';
    try {
      await Promise.race([
        coord.finished,
        new Promise((_, rej) => setTimeout(() => rej(new Error(`the job did not finish:\n${coord.lines.slice(-30).join('\n')}`)), 300_000)),
      ]);
      // Someone watching on the class's network: the dashboard says what auto chose, since when, and why.
      const chrome = await launchChromiumIn(bed, 'watch', null);
      try {
        const page = await (await chrome.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
        await page.goto(`${url}/#dashboard`);
        await page.waitForFunction(
          () => /rounds of 8 since step 4/.test(document.getElementById('dash-mode')?.textContent ?? ''), undefined, { timeout: 60_000 },
        );
        dashboard = await page.evaluate(() => document.getElementById('dash-mode')!.textContent ?? '');
        mkdirSync('test-output', { recursive: true });
        await page.screenshot({ path: 'test-output/dashboard-sync-auto.png', fullPage: true });
      } finally {
        await chrome.close();
      }
    } finally {
      for (const v of vs) v.kill('SIGKILL');
      await coord.stop();
    }
    console.log(`the dashboard: ${dashboard}`);
    expect(dashboard).toMatch(new RegExp('^auto: the coordinator measures the ring and runs rounds of 1 to 8 steps .* · rounds of 8 since step 4: '
      + 'the all-reduce and waiting are \\d+% of a sync step'));
    const records = await metricsOf(jobDir);
    const syncs = records.filter((r) => r.type === 'sync');
    const steps = records.filter((r) => r.type === 'step');
    console.log(`sync auto on wifi: ${syncs.map((s) => `after step ${s.step}: ${s.from} -> ${s.h} (${s.reason})`).join('; ')}`);
    expect(syncs.map((s) => [s.step, s.from, s.h]), coord.lines.slice(-30).join('\n')).toEqual([[4, 1, 8]]);
    expect(syncs[0]!.share).toBeGreaterThan(0.5);
    // Every step and round once, in order, each with one checksum; the rounds after the choice.
    expect(steps.map((r) => [r.step, r.traffic?.innerSteps])).toEqual([[1, 1], [2, 1], [3, 1], [4, 1], [12, 8], [20, 8], [28, 8], [36, 8]]);
    for (const r of steps) expect(new Set(r.peers.map((p) => p.checksum)).size, `step ${r.step}`).toBe(1);
    expect(records.filter((r) => r.type === 'abort')).toEqual([]);
    // A round sends about an eighth of what a sync step sends per image.
    const perImage = (n: number) => steps.find((r) => r.step === n)!.traffic!.bytesPerImage;
    expect(perImage(20) / perImage(3)).toBeLessThan(0.15);
    // The sync steps before the switch: one peer's sync SGD within float32 rounding (the checkpoint of step 4).
    // The same job in sync mode (the rate schedule runs over the job's length) on one peer.
    const one = await onePeerWeights(root.dir, 'one', data, testJob(36), 'wasm');
    const at4 = async (dir: string) => {
      const store = await openCheckpointStore(join(dir, 'checkpoints'), { keep: 100 });
      return decodeCheckpoint((await store.readStepFile(4))!.bytes, `step 4 of ${dir}`).weights;
    };
    const diff = relDiff(await at4(jobDir), await at4(one.jobDir));
    console.log(`3 peers in an auto job after 4 sync steps vs one peer: max |dw| / max |w| = ${diff.toExponential(2)}`);
    expect(diff).toBeLessThan(1e-3);
  }, 420_000);
});
