// Public API of the data pipeline. Browser-safe: the Node pieces are ./decode-node.ts
// (sharp + node:zlib: nodeDecoder, nodeGunzip, nodeZlib) and ./node-source.ts (fileShardSource).
export { DataError, isDataError, type DataErrorKind } from './errors.ts';
export { packTar, readTar, streamTar, tarHeader, TarParser, type TarEntry } from './tar.ts';
export { chunksOf, gunzip, isGzip, maybeGunzipStream, type Gunzip } from './bytes.ts';
export {
  MANIFEST_FILE,
  SPLITS,
  makeShardIndex,
  sampleKey,
  shardFileName,
  validateManifest,
  type ImageEncoding,
  type ImageInfo,
  type Manifest,
  type SampleLocation,
  type ShardIndex,
  type ShardInfo,
  type SplitInfo,
  type SplitName,
} from './manifest.ts';
export { packShard, parseShard, streamShard, type EncodedSample, type ShardExpect } from './shard.ts';
export { checkSize, fromRgba, makeImage, type Decoder, type RawImage } from './image.ts';
export { browserDecoder } from './decode-browser.ts';
export { decodePng, encodePng, type Zlib } from './png.ts';
export {
  augment,
  cropWindow,
  normalizeInto,
  outputSize,
  randomResizedBox,
  resizeBilinear,
  sampleRng,
  type AugmentSpec,
  type CropBox,
} from './augment.ts';
export { makeChannelStats, type ChannelStats } from './stats.ts';
export { httpShardSource, loadManifest, type ShardSource } from './source.ts';
export { BatchLoader, defaultAugment, type Batch, type BatchLoaderOptions } from './loader.ts';
