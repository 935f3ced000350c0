// Checks the real CIFAR-10 conversion (not run by the tests: it fetches 139 MB once):
//   node --import tsx coordinator/data/check-cifar10.ts [cacheDir]
// Builds .cache/data/cifar10 on first use, then checks counts per class, the channel means
// against the known 125.3/123.0/113.9, and measures BatchLoader throughput in Node.

import { join } from 'node:path';
import { nodeDecoder, nodeGunzip } from '../../src/data/decode-node.ts';
import { BatchLoader, defaultAugment } from '../../src/data/loader.ts';
import { SPLITS } from '../../src/data/manifest.ts';
import { fileShardSource } from '../../src/data/node-source.ts';
import { parseShard } from '../../src/data/shard.ts';
import { makeRng } from '../../src/rng.ts';
import { DEFAULT_CACHE_DIR, ensureDataset } from './cli.ts';

const cacheDir = process.argv[2] ?? DEFAULT_CACHE_DIR;
let t = performance.now();
const m = await ensureDataset('cifar10', cacheDir);
console.log(`ensureDataset: ${((performance.now() - t) / 1000).toFixed(1)} s`);
const dir = join(cacheDir, 'cifar10');
const source = fileShardSource(dir);
const failures: string[] = [];
const expectThat = (ok: boolean, what: string): void => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};

for (const split of SPLITS) {
  const perClass = new Array<number>(10).fill(0);
  let first = 0;
  for (const s of m.splits[split].shards) {
    for (const x of await parseShard(await source.read(s.file), s.file, { firstId: first, samples: s.samples, classes: 10 })) perClass[x.label]++;
    first += s.samples;
  }
  const want = split === 'train' ? 5000 : 1000;
  expectThat(perClass.every((n) => n === want), `${split}: ${want} per class (${perClass.join(' ')})`);
}
const known = [125.3, 123.0, 113.9];
expectThat(
  m.mean.every((v, k) => Math.abs(v * 255 - known[k]) < 0.1),
  `train means ${m.mean.map((v) => (v * 255).toFixed(2)).join('/')} (known ${known.join('/')}), std ${m.std.map((v) => (v * 255).toFixed(2)).join('/')}`,
);

const loader = new BatchLoader({
  manifest: m, source, decoder: nodeDecoder, gunzip: nodeGunzip, split: 'train', augment: defaultAugment(m, 'train'), seed: 1, cacheBytes: 1 << 30,
});
const rng = makeRng(5);
const batch = (): number[] => Array.from({ length: 512 }, () => rng.int(m.splits.train.samples));
await loader.load(batch(), 0); // fetch and parse the shards once
t = performance.now();
let n = 0;
for (let i = 0; i < 8; i++) n += (await loader.load(batch(), i)).labels.length;
const secs = (performance.now() - t) / 1000;
console.log(`BatchLoader (decode + pad-crop-flip + normalise, shards cached): ${Math.round(n / secs)} images/s`);
if (failures.length > 0) {
  console.error(`${failures.length} check(s) failed`);
  process.exitCode = 1;
}
