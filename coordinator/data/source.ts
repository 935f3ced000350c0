// What the shard builder reads: a data set's classes, image format and, per split, its
// samples in order, each as raw pixels (for the statistics) and encoded bytes (for the shard).
// A source of files (ImageNet) also says which files it converted or skipped, and can start a
// split at any position of its file list, so an interrupted build resumes where it stopped.

import type { RawImage } from '../../src/data/image.ts';
import type { ImageInfo, SplitName } from '../../src/data/manifest.ts';
import type { ReportEntry } from './build-report.ts';

export interface SourceItem {
  readonly raw: RawImage;
  readonly bytes: Uint8Array;
  readonly label: number;
  /** Set when the file was converted on the way (CMYK, greyscale, PNG under a .JPEG name...). */
  readonly note?: ReportEntry;
}

/** A position of the split's list that yields no sample, and why. */
export interface SkippedItem {
  readonly skipped: ReportEntry;
}

export type SourceEntry = SourceItem | SkippedItem;

export const isSkipped = (e: SourceEntry): e is SkippedItem => 'skipped' in e;

/** What listing the source found: how it was laid out, notes for the user, files left out up front. */
export interface SourceListing {
  readonly layout: string;
  readonly notes: readonly string[];
  readonly skipped: readonly ReportEntry[];
}

export interface DatasetSource {
  readonly dataset: string;
  readonly classes: readonly string[];
  readonly image: ImageInfo;
  /** Positions in the split's list (samples, plus files that will be skipped). */
  count(split: SplitName): number;
  items(split: SplitName): AsyncIterable<SourceItem>;
  /**
   * The split's list from position `start`: one entry per position, a sample or a skipped
   * file. Without it, the builder reads items() and drops the first `start`.
   */
  entries?(split: SplitName, start: number): AsyncIterable<SourceEntry>;
  /** Identifies the source's contents (file names, sizes, labels): a build resumes or is reused only when it matches. */
  readonly fingerprint?: string;
  readonly listing?: SourceListing;
}
