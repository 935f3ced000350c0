// What the shard builder reads: a data set's classes, image format and, per split, its
// samples in order, each as raw pixels (for the statistics) and encoded bytes (for the shard).

import type { RawImage } from '../../src/data/image.ts';
import type { ImageInfo, SplitName } from '../../src/data/manifest.ts';

export interface SourceItem {
  readonly raw: RawImage;
  readonly bytes: Uint8Array;
  readonly label: number;
}

export interface DatasetSource {
  readonly dataset: string;
  readonly classes: readonly string[];
  readonly image: ImageInfo;
  count(split: SplitName): number;
  items(split: SplitName): AsyncIterable<SourceItem>;
}
