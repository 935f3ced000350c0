// The volunteer's data path in a Worker: manifest and shards over HTTP, gunzip with
// DecompressionStream, browserDecoder (ImageDecoder or createImageBitmap), augmentation.
import { browserDecoder } from '../../../src/data/decode-browser.ts';
import { BatchLoader } from '../../../src/data/loader.ts';
import { httpShardSource, loadManifest } from '../../../src/data/source.ts';
import type { WorkerReply, WorkerRequest } from './protocol.ts';

const scope = self as unknown as { postMessage(m: WorkerReply): void; onmessage: ((e: MessageEvent<WorkerRequest>) => void) | null };

async function handle(req: WorkerRequest): Promise<WorkerReply> {
  if (req.noImageDecoder) Reflect.deleteProperty(globalThis, 'ImageDecoder');
  const decoder = typeof ImageDecoder !== 'undefined' ? 'ImageDecoder' : 'createImageBitmap';
  if (req.kind === 'decode') {
    const images = [];
    for (const im of req.images) {
      const img = await browserDecoder.decode(Uint8Array.from(im.bytes), im.encoding, im.channels);
      images.push({ data: Array.from(img.data), height: img.height, width: img.width });
    }
    return { kind: 'decode', decoder, images };
  }
  const source = httpShardSource(req.baseUrl);
  const manifest = await loadManifest(source);
  const loader = new BatchLoader({ manifest, source, decoder: browserDecoder, split: 'train', augment: req.augment, seed: req.seed });
  const b = await loader.load(req.ids, req.epoch);
  return { kind: 'batch', decoder, x: Array.from(b.x), labels: Array.from(b.labels), shape: [...b.shape] };
}

scope.onmessage = (e) => {
  handle(e.data).then(
    (r) => scope.postMessage(r),
    (err: unknown) => scope.postMessage({ kind: 'error', message: err instanceof Error ? err.message : String(err) }),
  );
};
