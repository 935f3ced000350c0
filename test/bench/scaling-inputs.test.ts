// The scaling bench's measured inputs (bench/scaling-inputs.ts, -predict.ts, -hosts.ts): the
// link taken from a recorded transport run, the ImageNet job's micro-batches by fit.ts's rule,
// the system an ImageNet job runs, and the link a held-out test-bed run had.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Calibration } from '../../bench/scaling-calibrate.ts';
import { predictRun, runSpeed } from '../../bench/scaling-calibrate.ts';
import { hostLink, predictHeldOut } from '../../bench/scaling-hosts.ts';
import { readTransport, ringLinkRate, type TransportFigures } from '../../bench/scaling-inputs.ts';
import {
  HELD_PER_PARAM_BYTES, NOMINAL_INPUTS, RESNET50_IMAGE_BYTES, fitImages, linkKinds, predictRow, scenarios, systemFor, type PredictInputs,
} from '../../bench/scaling-predict.ts';
import { modelProfile } from '../../bench/scaling-profile.ts';
import type { RunSummary } from '../../bench/scaling-run.ts';
import { inputTable } from '../../bench/scaling-table.ts';
import { DEFAULT_GPU_BUDGET, fitMicroBatch } from '../../src/nn/fit.ts';
import { modelByName } from '../../src/nn/models.ts';

const CAL: Calibration = {
  imagesPerSecPerPeer: 139, stragglerMean: 0.055, link: { latencyS: 0.0017, bandwidthBytesPerS: 40e6 }, comm: 'latency+bandwidth',
  overheadS: 0.011, overheadPerPeerS: 0.004,
};
const T: TransportFigures = {
  nodeMBps: 118.6, pageMBps: 39.7, tcpMBps: 119.4, nodeCpuSPerGb: 2.37, nodeSendCpuSPerGb: 1.66, pageCpuSPerGb: 23.6, pageSendCpuSPerGb: 24.0,
  file: 'docs/results/transport.json', date: '2026-11-29T00:00:00.000Z', commit: 'abc1234',
};
const SUMMARY = {
  bench: 'transport', node_mbps: T.nodeMBps, page_mbps: T.pageMBps, tcp_mbps: T.tcpMBps, node_cpu_s_per_gb: T.nodeCpuSPerGb,
  node_send_cpu_s_per_gb: T.nodeSendCpuSPerGb, page_cpu_s_per_gb: T.pageCpuSPerGb, page_send_cpu_s_per_gb: T.pageSendCpuSPerGb,
};

let root: string;
beforeAll(async () => { root = await mkdtemp(join(tmpdir(), 'vt-scaling-inputs-')); });
afterAll(async () => { await rm(root, { recursive: true, force: true }); });

describe('the link from the transport bench', () => {
  it('reads the newest recorded run that has every figure, and says what is missing otherwise', async () => {
    const dir = join(root, 'a');
    expect(readTransport(dir)).toEqual({ missing: expect.stringContaining('npm run bench -- transport --record') });
    await mkdir(join(dir, 'docs', 'results'), { recursive: true });
    const run = (summary: unknown, date: string) => ({ date, args: [], commit: 'abc1234', dirty: false, machine: {}, seconds: 1, summary });
    const file = join(dir, 'docs', 'results', 'transport.json');
    // The newest run was --no-page (no page figures): the one before it is taken.
    const noPage = { ...SUMMARY, page_mbps: null, page_cpu_s_per_gb: null, page_send_cpu_s_per_gb: null };
    await writeFile(file, JSON.stringify({ bench: 'transport', runs: [run(SUMMARY, T.date), run(noPage, '2026-11-30T00:00:00.000Z')] }));
    expect(readTransport(dir)).toEqual(T);
    await writeFile(file, JSON.stringify({ bench: 'transport', runs: [run(noPage, T.date)] }));
    expect(readTransport(dir)).toEqual({ missing: expect.stringContaining('page_mbps') });
    await writeFile(file, '{not json');
    expect(readTransport(dir)).toEqual({ missing: expect.stringContaining('is not a record') });
  });

  it('a ring link carries the measured one-way rate, or less where sending and receiving at once would need more than a core', () => {
    expect(ringLinkRate(118.6, 2.37, 1.66)).toBeCloseTo(118.6e6, 3);
    expect(ringLinkRate(39.7, 23.6, 24.0)).toBeCloseTo(1e9 / 47.6, 3);
    const [g, page, m100, home] = linkKinds(T);
    expect([g!.key, page!.key, m100!.key, home!.key]).toEqual(['1g', '1g-page', '100m', 'home']);
    expect(g!.bytesPerS).toBeCloseTo(118.6e6, 3);
    expect(g!.status).toBe('measured');
    expect(page!.bytesPerS).toBeCloseTo(1e9 / 47.6, 3);
    // Never above the line, and without a run: the line, marked assumed.
    expect(linkKinds({ ...T, nodeMBps: 500, nodeCpuSPerGb: 0.1, nodeSendCpuSPerGb: 0.1 })[0]!.bytesPerS).toBe(125e6);
    expect(linkKinds(null).slice(0, 2).map((l) => [l.bytesPerS, l.status])).toEqual([[125e6, 'assumed'], [125e6, 'assumed']]);
  });

  it('every input of the table says measured, fitted, assumed or code, and where it comes from', () => {
    const inp: PredictInputs = { links: linkKinds(T), hostUpdateS: { small: 0.01, resnet50: 0.5 } };
    const table = inputTable(CAL, inp, null);
    for (const [k, x] of Object.entries(table)) {
      expect(['measured', 'fitted', 'assumed', 'code'], k).toContain(x.status);
      expect(x.source.length, k).toBeGreaterThan(10);
      expect(Number.isFinite(x.value), k).toBe(true);
    }
    expect(table.link_1g!.status).toBe('measured');
    expect(table.gpuResnet50At224ImagesPerS!.status).toBe('assumed');
    expect(inputTable(CAL, NOMINAL_INPUTS, 'no record').link_1g!.source).toContain('no record');
  });
});

describe('an ImageNet job as the predictions run it', () => {
  it('micro-batches by fit.ts\'s own rule: whole BN groups beside the model in the GPU budget', () => {
    for (const px of [64, 224]) {
      const p = modelProfile(modelByName('resnet50', [3, px, px], 1000));
      const group = px === 224 ? 4 : 8;
      const fit = fitMicroBatch(
        { perImageBytes: RESNET50_IMAGE_BYTES[px]!, largestPerImageBytes: 1, msPerImage: 1 },
        { usedBytes: HELD_PER_PARAM_BYTES * p.paramCount, peakBytes: 0, limitBytes: null, maxTensorBytes: 2 ** 40 }, group,
      );
      expect(fitImages(RESNET50_IMAGE_BYTES[px]!, p.paramCount, DEFAULT_GPU_BUDGET, group)).toBe(fit.images);
      const s = scenarios(CAL).find((x) => x.key === `resnet50-${px}`)!;
      expect(s.microBatchImages).toBe(fit.images);
      expect(s.microBatchImages! % group).toBe(0);
      // A 16 GiB budget takes more at once.
      expect(scenarios(CAL, NOMINAL_INPUTS, 16 * 2 ** 30).find((x) => x.key === `resnet50-${px}`)!.microBatchImages).toBeGreaterThan(fit.images);
    }
  });

  it('never steals (shard-local sampling), computes in micro-batches and pays the measured host update; the small CNN keeps the defaults', () => {
    const inp: PredictInputs = { links: linkKinds(T), hostUpdateS: { small: 0.01, resnet50: 0.51 } };
    const [small, , r224] = scenarios(CAL, inp);
    const cur = systemFor(CAL, 'current', r224!);
    expect(cur.steal).toBeUndefined();
    expect(cur.microBatchImages).toBe(r224!.microBatchImages);
    expect(cur.overheadPerPeerS).toBeCloseTo(CAL.overheadPerPeerS + 0.5 + (2 * r224!.profile.gradBytes) / 5e9, 12);
    // Shard-local sampling never steals: the steal system is the current one, and the planned one computes in micro-batches too.
    expect(systemFor(CAL, 'steal', r224!)).toEqual(cur);
    expect(systemFor(CAL, 'planned', r224!).steal).toBeUndefined();
    expect(systemFor(CAL, 'planned', r224!).microBatchImages).toBe(r224!.microBatchImages);
    expect(systemFor(CAL, 'current', small!).steal?.auto).toBe(true);
    expect(systemFor(CAL, 'current', small!).microBatchImages).toBeUndefined();
    // The micro-batches and the update cost the 64-peer step: efficiency falls against one slice at once with no host update.
    const lan = inp.links[0]!;
    const row = predictRow(CAL, 'current', r224!, 32_768, lan, 64);
    const bare = predictRow(CAL, 'current', { ...r224!, microBatchImages: undefined, extraOverheadPerPeerS: 0 }, 32_768, lan, 64);
    expect(row.stepS).toBeGreaterThan(bare.stepS);
    expect(row.steals).toBe(false);
  });
});

describe('the held-out runs on the test bed', () => {
  it('a shared medium gives each ring link 1/N of it; a LAN link is the measured Node link; delays add the fitted software latency', () => {
    const lan = linkKinds(T)[0]!;
    expect(hostLink('wifi', 3, lan, CAL)).toEqual({ latencyS: 0.003 + 0.0017, bandwidthBytesPerS: 12.5e6 / 3 });
    expect(hostLink('lan', 3, lan, CAL).bandwidthBytesPerS).toBeCloseTo(118.6e6, 3);
    expect(hostLink('lan', 3, lan, CAL).latencyS).toBeCloseTo(0.0002 + 0.0017, 12);
  });

  it('each run is predicted by the loopback calibration with the test bed\'s link and its own measured speed', () => {
    const small = modelProfile(modelByName('small-cnn', [1, 28, 28], 10));
    const summary = { peers: 3, batch: 48, computeCriticalMs: 400, computeMs: 360, allReduceMs: 500, stepMs: 1000 } as RunSummary;
    const lan = linkKinds(T)[0]!;
    const h = predictHeldOut(CAL, { profile: 'wifi', summary }, small, lan);
    const m = { peers: 3, batch: 48, share: 1 / 3, computeCriticalS: 0.4, computeMeanS: 0.36, allReduceS: 0.5, stepS: 1 };
    expect(h.predictedS).toBeCloseTo(predictRun({ ...CAL, link: hostLink('wifi', 3, lan, CAL) }, m, small, runSpeed(m, CAL.stragglerMean)), 12);
    expect(h.relError).toBeCloseTo(Math.abs(h.predictedS - 1), 12);
    // The wifi link makes the all-reduce of 1.56 MB take most of a second: a prediction that ignored the medium would be far off.
    const fast = predictHeldOut(CAL, { profile: 'lan', summary }, small, lan);
    expect(h.predictedS - fast.predictedS).toBeGreaterThan(0.4);
  });
});
