// The loaders a Node peer trains and evaluates with, reading a built data set from disk.
import { BatchLoader, defaultAugment } from '../../src/data/loader.ts';
import { nodeDecoder } from '../../src/data/decode-node.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { fileShardSource } from '../../src/data/node-source.ts';

export interface LocalLoaders {
  train: BatchLoader;
  evalLoader: BatchLoader;
  /** The first `evalSamples` ids of the test split. */
  evalIds: number[];
}

export function localLoaders(manifest: Manifest, dir: string, seed: number, evalSamples: number): LocalLoaders {
  const source = fileShardSource(dir);
  const loader = (split: 'train' | 'val') => new BatchLoader({ manifest, source, decoder: nodeDecoder, split, augment: defaultAugment(manifest, split), seed });
  const evalIds = Array.from({ length: Math.min(evalSamples, manifest.splits.val.samples) }, (_, i) => i);
  return { train: loader('train'), evalLoader: loader('val'), evalIds };
}
