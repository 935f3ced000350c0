// ImageNet built once and reused. `src` is either a folder of already-built shards (it holds
// manifest.json: checked and used as it is) or an ImageNet folder, whose shards go to `out`
// or to <cacheDir>/imagenet-<size>-<hash of the source path and listing>: a complete build
// there of the same listing and options is reused, a partial one resumed, else one is built.

import { createHash } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { DataError } from '../../src/data/errors.ts';
import { MANIFEST_FILE, validateManifest, type Manifest, type SplitName } from '../../src/data/manifest.ts';
import { buildFromSource, buildIdentity, isSameBuild, readComplete } from './build.ts';
import { exists, removeStalePartials } from './files.ts';
import { imagenetKey, imagenetSource, type ImagenetOptions } from './imagenet.ts';
import { DEFAULT_CACHE_DIR } from './paths.ts';

export const DEFAULT_IMAGENET_SHARD = 1000;

export interface EnsureImagenetOptions extends ImagenetOptions {
  /** An ImageNet folder (see IMAGENET_LAYOUTS) or a folder of built shards. */
  readonly src: string;
  /** Stored image size (the CLI takes 64, 128 or 224; any integer >= 8 here). */
  readonly size: number;
  /** Where the shards go (default: a folder of cacheDir named by size and source). */
  readonly out?: string;
  readonly cacheDir?: string;
  readonly samplesPerShard?: number;
  /** At most this many files per split (quick builds). */
  readonly limit?: number;
  /** Progress bars on stderr (default true). */
  readonly progress?: boolean;
  /** Images decoded at once (default 4). */
  readonly concurrency?: number;
  readonly onShardWritten?: (split: SplitName, index: number) => void | Promise<void>;
}

export interface EnsuredImagenet {
  readonly manifest: Manifest;
  /** The folder holding manifest.json and the shards. */
  readonly dir: string;
  /** False when an earlier complete build (or src itself) was used. */
  readonly built: boolean;
}

export function checkImageSize(size: number): void {
  if (!(Number.isInteger(size) && size >= 8)) throw new DataError('bad-input', `size must be an integer >= 8, got ${size}`);
}

/** src's own shards: complete, and stored at `size`. */
async function usePrebuilt(src: string, size: number): Promise<EnsuredImagenet> {
  const path = join(src, MANIFEST_FILE);
  const manifest = validateManifest(JSON.parse(await readFile(path, 'utf8')) as unknown, path);
  if (!(await readComplete(src))) throw new DataError('bad-manifest', `${src} holds ${MANIFEST_FILE} but some of its shards are missing or cut short`);
  const { height, width } = manifest.image;
  if (height !== size || width !== size) {
    throw new DataError('bad-input', `${src} holds shards of ${width}x${height} images, not ${size}x${size}: `
      + `pass size ${height === width ? height : '(theirs)'}, or the ImageNet source folder to build ${size}x${size} shards`);
  }
  return { manifest, dir: resolve(src), built: false };
}

export async function ensureImagenet(o: EnsureImagenetOptions): Promise<EnsuredImagenet> {
  checkImageSize(o.size);
  const spp = o.samplesPerShard ?? DEFAULT_IMAGENET_SHARD;
  if (!(Number.isInteger(spp) && spp > 0)) throw new DataError('bad-input', `samplesPerShard must be a positive integer, got ${spp}`);
  if (!(await exists(o.src))) throw new DataError('source-missing', `${o.src} does not exist`);
  if (await exists(join(o.src, MANIFEST_FILE))) return usePrebuilt(o.src, o.size);
  const source = await imagenetSource(o.src, o.size, o.limit, o.concurrency, o);
  const hash = createHash('sha256').update(`${resolve(o.src)}\n${source.fingerprint}`).digest('hex').slice(0, 12);
  const dir = resolve(o.out ?? join(o.cacheDir ?? DEFAULT_CACHE_DIR, `imagenet-${o.size}-${hash}`));
  const run = {
    out: dir, samplesPerShard: spp, gzip: false, sourceId: resolve(o.src), options: imagenetKey(o.size, o.limit, o), progress: o.progress ?? true,
    onShardWritten: o.onShardWritten,
  };
  const ready = await isSameBuild(dir, buildIdentity(source, run));
  if (ready) return { manifest: ready, dir, built: false };
  await mkdir(dirname(dir), { recursive: true });
  await removeStalePartials(dir);
  const { manifest } = await buildFromSource(source, run);
  return { manifest, dir, built: true };
}
