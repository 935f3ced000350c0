// The browser half of the data path in headless Chromium, inside a dedicated Worker: shards
// and manifest fetched from a server, gunzipped with DecompressionStream, decoded with
// ImageDecoder and with the createImageBitmap fallback, augmented: the batch must equal the
// Node peer's bit for bit (same sample, same augmentation, on any peer).

import { rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Page } from 'playwright-core';
import sharp from 'sharp';
import type { ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildShards } from '../../coordinator/data/cli.ts';
import type { AugmentSpec } from '../../src/data/augment.ts';
import { nodeDecoder, nodeGunzip, nodeZlib } from '../../src/data/decode-node.ts';
import { BatchLoader } from '../../src/data/loader.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { fileShardSource } from '../../src/data/node-source.ts';
import { encodePng } from '../../src/data/png.ts';
import { launchChromium, type LaunchedBrowser } from '../../testbed/chromium.ts';
import { startViteServer } from '../helpers/vite.ts';
import type { WorkerReply, WorkerRequest } from './browser/protocol.ts';
import { randomImage } from './helpers.ts';

const DATA = resolve('test-output/data-browser/mnist');

describe('data path in a Chromium Worker', () => {
  let server: ViteDevServer;
  let browser: LaunchedBrowser;
  let page: Page;
  let origin: string;
  let manifest: Manifest;

  beforeAll(async () => {
    manifest = await buildShards({ dataset: 'mnist', out: DATA, limit: 96, samplesPerShard: 40, progress: false });
    ({ server, origin } = await startViteServer());
    browser = await launchChromium({ webgpu: 'swiftshader' });
    page = await (await browser.newContext()).newPage();
    await page.goto(`${origin}/test/data/browser/decode.html`);
    await page.waitForFunction(() => 'runInWorker' in window);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await rm(resolve('test-output/data-browser'), { recursive: true, force: true });
  });

  // A fresh page per request: hiding ImageDecoder in a Worker cannot be undone.
  async function inWorker(req: WorkerRequest): Promise<WorkerReply> {
    await page.reload();
    await page.waitForFunction(() => 'runInWorker' in window);
    const reply = await page.evaluate((r) => (window as unknown as { runInWorker(r: WorkerRequest): Promise<WorkerReply> }).runInWorker(r), req);
    if (reply.kind === 'error') throw new Error(`worker: ${reply.message}`);
    return reply;
  }

  const ids = [95, 0, 41, 7, 80, 40];
  const augment: AugmentSpec = { kind: 'pad-crop-flip', pad: 3, flip: true };

  for (const noImageDecoder of [false, true]) {
    it(`a batch over HTTP equals the Node peer's bit for bit (${noImageDecoder ? 'createImageBitmap' : 'ImageDecoder'})`, async () => {
      const reply = await inWorker({ kind: 'batch', baseUrl: `${origin}/test-output/data-browser/mnist/`, ids, epoch: 3, seed: 11, augment, noImageDecoder });
      if (reply.kind !== 'batch') throw new Error(`unexpected reply ${reply.kind}`);
      expect(reply.decoder).toBe(noImageDecoder ? 'createImageBitmap' : 'ImageDecoder');
      const node = await new BatchLoader({
        manifest, source: fileShardSource(DATA), decoder: nodeDecoder, gunzip: nodeGunzip, split: 'train', augment, seed: 11,
      }).load(ids, 3);
      expect(reply.shape).toEqual([...node.shape]);
      expect(reply.labels).toEqual(Array.from(node.labels));
      expect(reply.x.length).toBe(node.x.length);
      const worst = reply.x.reduce((m, v, i) => Math.max(m, Math.abs(v - node.x[i])), 0);
      expect(worst).toBe(0);
    });
  }

  it('decodes RGB PNGs exactly and JPEGs within libjpeg rounding', async () => {
    const rgb = randomImage(3, 9, 14, 3);
    const png = encodePng(rgb, nodeZlib);
    const smooth = randomImage(4, 16, 16, 3);
    for (let i = 0; i < smooth.data.length; i++) smooth.data[i] = (i % 48) * 5;
    const jpg = new Uint8Array(await sharp(smooth.data, { raw: { width: 16, height: 16, channels: 3 } }).jpeg({ quality: 95 }).toBuffer());
    const reply = await inWorker({
      kind: 'decode',
      noImageDecoder: false,
      images: [
        { bytes: Array.from(png), encoding: 'png', channels: 3 },
        { bytes: Array.from(jpg), encoding: 'jpg', channels: 3 },
      ],
    });
    if (reply.kind !== 'decode') throw new Error(`unexpected reply ${reply.kind}`);
    expect(reply.images[0]).toEqual({ data: Array.from(rgb.data), height: 9, width: 14 });
    const nodeJpg = await nodeDecoder.decode(jpg, 'jpg', 3);
    expect(reply.images[1].data.length).toBe(nodeJpg.data.length);
    const diff = reply.images[1].data.reduce((m, v, i) => Math.max(m, Math.abs(v - nodeJpg.data[i])), 0);
    expect(diff).toBeLessThanOrEqual(4);
  });
});
