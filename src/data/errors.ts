// Typed failures of the data pipeline. Callers branch on `kind`; the message says what to
// do next (rebuild the shards, fix the manifest, pass other arguments).

export type DataErrorKind =
  | 'bad-tar' // a shard is truncated or corrupt (bad header checksum, cut-off data)
  | 'bad-shard' // a shard's tar is well formed but its samples are not (missing .cls, bad label)
  | 'bad-manifest' // manifest.json is missing fields or contradicts itself
  | 'bad-input' // the caller passed something unusable (unknown sample id, bad option)
  | 'decode-failed' // an image could not be decoded or has the wrong size / channels
  | 'fetch-failed' // a shard or package could not be fetched
  | 'integrity' // a downloaded package does not match its integrity string
  | 'source-missing'; // a source folder or file for building shards does not exist

const NEXT_STEP: Record<DataErrorKind, string> = {
  'bad-tar': 'delete the shard (and its cached copy) and rebuild the data set',
  'bad-shard': 'rebuild the data set with the coordinator CLI (build-shards)',
  'bad-manifest': 'rebuild the data set with the coordinator CLI (build-shards), or fix manifest.json',
  'bad-input': 'fix the call',
  'decode-failed': 'rebuild the data set; if it persists the image codec is not supported here',
  'fetch-failed': 'check that the coordinator (or npm registry) is reachable and try again',
  integrity: 'try again (the bad file was removed); if it fails again, run "npm cache verify"',
  'source-missing': 'check the path you passed (an ImageNet folder holds train/<wnid>/*.JPEG)',
};

export class DataError extends Error {
  readonly kind: DataErrorKind;
  constructor(kind: DataErrorKind, detail: string, options?: { cause?: unknown }) {
    super(`data ${kind}: ${detail}; ${NEXT_STEP[kind]}.`, options);
    this.name = 'DataError';
    this.kind = kind;
  }
}

export function isDataError(e: unknown): e is DataError {
  return e instanceof DataError;
}
