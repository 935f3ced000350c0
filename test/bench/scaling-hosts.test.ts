// The scaling bench's held-out run (bench/scaling-hosts.ts) for real, at a small size: two
// volunteers on hosts of their own in a test bed on the wifi profile (a shared 100 Mbit/s
// medium, 3 ms one way), direct links, the calibration runs' job; its figures come back from the
// job's metrics and the simulator predicts it. The error itself is the bench's to report (the
// machine's load moves it); here the run must be whole and its prediction must see the medium.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Calibration } from '../../bench/scaling-calibrate.ts';
import { predictHeldOut, runOnHosts } from '../../bench/scaling-hosts.ts';
import { linkKinds } from '../../bench/scaling-predict.ts';
import { modelProfile } from '../../bench/scaling-profile.ts';
import { MODEL } from '../../bench/scaling-run.ts';
import { buildShards } from '../../coordinator/data/cli.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { modelByName } from '../../src/nn/models.ts';

const CAL: Calibration = {
  imagesPerSecPerPeer: 139, stragglerMean: 0.05, link: { latencyS: 0.002, bandwidthBytesPerS: 40e6 }, comm: 'latency+bandwidth',
  overheadS: 0.01, overheadPerPeerS: 0.005,
};

let root: string;
let manifest: Manifest;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'vt-scaling-hosts-'));
  manifest = await buildShards({ dataset: 'mnist', out: join(root, 'data', 'mnist'), limit: 400, samplesPerShard: 200, progress: false });
}, 120_000);
afterAll(async () => { await rm(root, { recursive: true, force: true }); });

describe('the scaling bench\'s held-out run', () => {
  it('two volunteers on their own hosts over the shared Wi-Fi medium train the job; the simulator predicts the step from the medium', async () => {
    const small = modelProfile(modelByName(MODEL, [1, 28, 28], 10));
    const r = await runOnHosts('wifi', 2, { root, dataDir: join(root, 'data'), manifest, batch: 32, steps: 3, gradBytes: small.gradBytes });
    expect(r.summary.measuredSteps).toBe(3);
    expect(r.summary.peers).toBe(2);
    expect(r.summary.steps.every((s) => s.ring === 2 && s.peers.length === 2)).toBe(true);
    // 2(N-1)/N x 1.56 MB per peer through one 12.5 MB/s medium: the all-reduce cannot be faster than its bytes allow.
    expect(r.summary.allReduceMs).toBeGreaterThan((2 * small.gradBytes) / 12.5e6 * 1000 * 0.5);
    const h = predictHeldOut(CAL, r, small, linkKinds(null)[0]!);
    console.log(`held out wifi N=2 B=32: measured ${(h.measuredS * 1000).toFixed(0)} ms, predicted ${(h.predictedS * 1000).toFixed(0)} ms`);
    expect(h.link.bandwidthBytesPerS).toBe(12.5e6 / 2);
    expect(h.predictedS).toBeGreaterThan((small.gradBytes / h.link.bandwidthBytesPerS));
    expect(Number.isFinite(h.relError)).toBe(true);
  }, 300_000);
});
