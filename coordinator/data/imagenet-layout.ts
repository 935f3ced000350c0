// Reading an ImageNet folder's layout: which files are train and val images and their
// labels. Train is train/<wnid>/*.JPEG (or Tiny-ImageNet's train/<wnid>/images/*.JPEG); val is
// one of three usual layouts (IMAGENET_LAYOUTS draws them). Classes are train/'s folder names,
// sorted. What cannot be read as one of these layouts is refused with the drawing; odd but
// usable things (no val/, classes without val images, val images of unknown classes) are
// notes or skipped files in the build report. The listing's fingerprint (paths, labels and
// sizes) decides whether an earlier build of this folder can be resumed or reused.

import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { DataError } from '../../src/data/errors.ts';
import type { ReportEntry } from './build-report.ts';
import { exists } from './files.ts';

export const IMAGE_FILE = /\.(jpe?g|png)$/i;
export const KAGGLE_CSV = 'LOC_val_solution.csv';
export const TINY_ANNOTATIONS = 'val_annotations.txt';

export const IMAGENET_LAYOUTS = `an ImageNet folder looks like this (train/ is required, val/ optional):
  <src>/
  ├── train/
  │   ├── n01440764/                  one folder per class (its WordNet id)
  │   │   ├── n01440764_10026.JPEG
  │   │   └── ...
  │   └── n01443537/images/*.JPEG     (Tiny-ImageNet: the images one folder down)
  └── val/, one of:
      (a) val/n01440764/*.JPEG                         class folders, as in train/
      (b) val/*.JPEG + ${KAGGLE_CSV}           flat, labels from Kaggle's CSV in <src>/ or val/
                                                       (header ImageId,PredictionString; first token = wnid)
      (c) val/images/*.JPEG + val/${TINY_ANNOTATIONS}  Tiny-ImageNet (tab-separated: file, wnid, ...)
  Kaggle's <src>/ILSVRC/Data/CLS-LOC/{train,val}/ is found too.`;

export type ValLayout = 'class folders' | typeof KAGGLE_CSV | typeof TINY_ANNOTATIONS | 'none';

export interface LabeledFile {
  readonly path: string;
  readonly label: number;
  readonly bytes: number;
}

export interface ImagenetListing {
  /** The folder holding train/ (src, or src/ILSVRC/Data/CLS-LOC). */
  readonly root: string;
  readonly classes: readonly string[];
  /** Sorted by path. */
  readonly train: readonly LabeledFile[];
  readonly val: readonly LabeledFile[];
  readonly layout: string;
  readonly notes: readonly string[];
  /** Val images left out while listing (unknown class, no annotation). */
  readonly skipped: readonly ReportEntry[];
  readonly fingerprint: string;
}

function refuse(detail: string): never {
  throw new DataError('source-missing', `${detail}\n${IMAGENET_LAYOUTS}\nmove the files into one of these layouts`);
}

interface DirList {
  readonly dirs: string[];
  readonly images: string[];
}

/** Sub-folders (hidden ones left out) and image files of `dir`, each sorted. */
async function listDir(dir: string): Promise<DirList> {
  const entries = await readdir(dir, { withFileTypes: true });
  const visible = entries.filter((e) => !e.name.startsWith('.'));
  return {
    dirs: visible.filter((e) => e.isDirectory()).map((e) => e.name).sort(),
    images: visible.filter((e) => e.isFile() && IMAGE_FILE.test(e.name)).map((e) => e.name).sort(),
  };
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const withSizes = (files: readonly { path: string; label: number }[]): Promise<LabeledFile[]> =>
  mapLimit(files, 32, async (f) => ({ ...f, bytes: (await stat(f.path)).size }));

const byPath = (a: { path: string }, b: { path: string }): number => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

async function listTrain(trainDir: string): Promise<{ classes: string[]; files: { path: string; label: number }[]; tiny: boolean; empty: string[] }> {
  if (!(await exists(trainDir))) refuse(`${trainDir} does not exist`);
  const top = await listDir(trainDir);
  if (top.dirs.length === 0) {
    refuse(top.images.length > 0
      ? `${trainDir} holds ${top.images.length} images but no class folders: put each class's images in train/<wnid>/`
      : `${trainDir} has no class folders`);
  }
  const files: { path: string; label: number }[] = [];
  const empty: string[] = [];
  let tiny = false;
  for (const [label, wnid] of top.dirs.entries()) {
    const dir = join(trainDir, wnid);
    const here = await listDir(dir);
    for (const f of here.images) files.push({ path: join(dir, f), label });
    let n = here.images.length;
    if (here.dirs.includes('images')) {
      tiny = true;
      const inner = await listDir(join(dir, 'images'));
      for (const f of inner.images) files.push({ path: join(dir, 'images', f), label });
      n += inner.images.length;
    }
    if (n === 0) empty.push(wnid);
  }
  if (files.length === 0) refuse(`${trainDir} has ${top.dirs.length} class folders but no .JPEG/.PNG files in them`);
  return { classes: top.dirs, files: files.sort(byPath), tiny, empty };
}

interface ValList {
  readonly layout: ValLayout;
  readonly files: { path: string; label: number }[];
  readonly skipped: ReportEntry[];
  readonly notes: string[];
}

/** Labels of flat val images from (file name -> wnid) pairs; a named file that is not there is refused. */
function labelFlat(
  dir: string, images: readonly string[], labels: Map<string, string>, classes: readonly string[], annotations: string, layout: ValLayout,
): ValList {
  const have = new Set(images);
  const missing = [...labels.keys()].filter((f) => !have.has(f));
  if (missing.length > 0) {
    refuse(`${annotations} names ${missing.length} file(s) that ${dir} does not have (${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''}): `
      + 'is it the annotation file of this val folder?');
  }
  const files: { path: string; label: number }[] = [];
  const skipped: ReportEntry[] = [];
  for (const f of images) {
    const path = join(dir, f);
    const wnid = labels.get(f);
    const label = wnid === undefined ? -1 : classes.indexOf(wnid);
    if (wnid === undefined) skipped.push({ path, action: 'skipped', reason: `no label in ${annotations}` });
    else if (label < 0) skipped.push({ path, action: 'skipped', reason: `class not in train/ (${wnid}, from ${annotations})` });
    else files.push({ path, label });
  }
  return { layout, files, skipped, notes: [] };
}

async function readTinyAnnotations(path: string): Promise<Map<string, string>> {
  const labels = new Map<string, string>();
  for (const [i, line] of (await readFile(path, 'utf8')).split(/\r?\n/).entries()) {
    if (line.trim() === '') continue;
    const [file, wnid] = line.split('\t');
    if (!file || !wnid) refuse(`${path} line ${i + 1} is not "<file>\\t<wnid>\\t...": ${JSON.stringify(line.slice(0, 80))}`);
    labels.set(file.trim(), wnid.trim());
  }
  return labels;
}

async function readKaggleCsv(path: string): Promise<Map<string, string>> {
  const lines = (await readFile(path, 'utf8')).split(/\r?\n/);
  if (lines[0]?.trim().replace(/^\uFEFF/, '') !== 'ImageId,PredictionString') refuse(`${path} does not start with the header ImageId,PredictionString`);
  const labels = new Map<string, string>();
  for (const [i, line] of lines.entries()) {
    if (i === 0 || line.trim() === '') continue;
    const comma = line.indexOf(',');
    const id = line.slice(0, comma).trim();
    const wnid = line.slice(comma + 1).trim().split(/\s+/)[0];
    if (comma < 0 || !id || !wnid) refuse(`${path} line ${i + 1} is not "ImageId,<wnid> ...": ${JSON.stringify(line.slice(0, 80))}`);
    labels.set(`${id}.JPEG`, wnid);
  }
  return labels;
}

async function listVal(valDir: string, csvPlaces: readonly string[], classes: readonly string[]): Promise<ValList> {
  if (!(await exists(valDir))) {
    return { layout: 'none', files: [], skipped: [], notes: [`${valDir} does not exist: the data set has no val split (evaluation needs one)`] };
  }
  const top = await listDir(valDir);
  const tiny = join(valDir, TINY_ANNOTATIONS);
  if (await exists(tiny)) {
    const imagesDir = join(valDir, 'images');
    if (!(await exists(imagesDir))) refuse(`${tiny} is there but ${imagesDir} is not`);
    return labelFlat(imagesDir, (await listDir(imagesDir)).images, await readTinyAnnotations(tiny), classes, tiny, TINY_ANNOTATIONS);
  }
  if (top.images.length > 0) {
    let csv: string | null = null;
    for (const dir of csvPlaces) if (!csv && (await exists(join(dir, KAGGLE_CSV)))) csv = join(dir, KAGGLE_CSV);
    if (!csv) {
      refuse(`${valDir} holds ${top.images.length} images in one flat folder and no ${KAGGLE_CSV} says their classes (looked in ${csvPlaces.join(', ')})`);
    }
    return labelFlat(valDir, top.images, await readKaggleCsv(csv), classes, csv, KAGGLE_CSV);
  }
  if (top.dirs.length === 0) {
    return { layout: 'none', files: [], skipped: [], notes: [`${valDir} is empty: the data set has no val split (evaluation needs one)`] };
  }
  const files: { path: string; label: number }[] = [];
  const skipped: ReportEntry[] = [];
  for (const wnid of top.dirs) {
    const label = classes.indexOf(wnid);
    for (const f of (await listDir(join(valDir, wnid))).images) {
      const path = join(valDir, wnid, f);
      if (label >= 0) files.push({ path, label });
      else skipped.push({ path, action: 'skipped', reason: `class not in train/ (val/${wnid}/)` });
    }
  }
  return { layout: 'class folders', files: files.sort(byPath), skipped, notes: [] };
}

/** Lists an ImageNet folder: classes, labelled train and val files with their sizes, notes. */
export async function listImagenet(src: string): Promise<ImagenetListing> {
  if (!(await exists(src))) throw new DataError('source-missing', `${src} does not exist`);
  const kaggle = join(src, 'ILSVRC', 'Data', 'CLS-LOC');
  const root = !(await exists(join(src, 'train'))) && (await exists(join(kaggle, 'train'))) ? kaggle : src;
  const train = await listTrain(join(root, 'train'));
  const val = await listVal(join(root, 'val'), [...new Set([root, join(root, 'val'), src])], train.classes);
  const notes = [...val.notes];
  if (train.empty.length > 0) {
    notes.push(`${train.empty.length} class folder(s) of train/ hold no images: ${train.empty.slice(0, 5).join(', ')}${train.empty.length > 5 ? ', ...' : ''}`);
  }
  if (val.layout !== 'none') {
    const seen = new Set(val.files.map((f) => f.label));
    const without = train.classes.filter((_, k) => !seen.has(k));
    if (without.length > 0) {
      notes.push(`${without.length} of ${train.classes.length} classes have no val images `
        + `(${without.slice(0, 5).join(', ')}${without.length > 5 ? ', ...' : ''})`);
    }
  }
  const [trainFiles, valFiles] = [await withSizes(train.files), await withSizes(val.files)];
  const h = createHash('sha256');
  h.update(`${train.classes.join(',')}\n`);
  for (const [split, files] of [['train', trainFiles], ['val', valFiles]] as const) {
    for (const f of files) h.update(`${split}\t${f.label}\t${relative(root, f.path)}\t${f.bytes}\n`);
  }
  const layout = `train: ${train.tiny ? 'Tiny-ImageNet class folders (<wnid>/images/)' : 'class folders'}; val: ${val.layout}`;
  return { root, classes: train.classes, train: trainFiles, val: valFiles, layout, notes, skipped: val.skipped, fingerprint: h.digest('hex') };
}
