// Builds shards from a DatasetSource into `out`, resumably. The work happens in
// `<out>.building` (see build-journal.ts); `out` appears, by one rename, only once the
// manifest is written, so nothing half-built is ever served, and a build that fails leaves an
// earlier complete `out` as it was. A failed or killed build keeps its complete shards in
// `<out>.building`; the next run with the same source and options continues from there and
// writes exactly the bytes an uninterrupted build would have.

import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DataError } from '../../src/data/errors.ts';
import { MANIFEST_FILE, SPLITS, validateManifest, type Manifest, type SplitInfo, type SplitName } from '../../src/data/manifest.ts';
import { BuildJournal, takeLock, type JournalShard } from './build-journal.ts';
import { makeReport, parseReportIdentity, REPORT_FILE, sameKey, summarizeReport, type BuildKey, type BuildReport, type ReportEntry } from './build-report.ts';
import { exists, replaceDir, writeFileAtomic } from './files.ts';
import { makeProgress, silentProgress } from './progress.ts';
import { addImage, emptySums, meanStd, type StatSums } from './shard-stats.ts';
import { isSkipped, type DatasetSource, type SourceEntry } from './source.ts';
import { SplitWriter } from './writer.ts';

export const BUILDING_SUFFIX = '.building';

export interface BuildRun {
  readonly out: string;
  readonly samplesPerShard: number;
  readonly gzip: boolean;
  /** Identifies the source when it has no fingerprint of its own (e.g. its folder). */
  readonly sourceId: string;
  /** The options the shards' bytes depend on (besides samplesPerShard and gzip). */
  readonly options: BuildKey;
  readonly progress: boolean;
  /** Called after each shard is written and recorded (tests interrupt builds with it). */
  readonly onShardWritten?: (split: SplitName, index: number) => void | Promise<void>;
  /** Where messages go (default stderr). */
  readonly log?: (line: string) => void;
}

export interface BuildResult {
  readonly manifest: Manifest;
  readonly report: BuildReport;
}

const stderrLine = (line: string): void => void process.stderr.write(`${line}\n`);

/** What identifies a build: the source's fingerprint and every option its bytes depend on. */
export function buildIdentity(
  source: DatasetSource, run: Pick<BuildRun, 'samplesPerShard' | 'gzip' | 'sourceId' | 'options'>,
): { fingerprint: string; options: BuildKey } {
  return {
    fingerprint: source.fingerprint ?? `${source.dataset}:${run.sourceId}`,
    options: { ...run.options, dataset: source.dataset, samplesPerShard: run.samplesPerShard, gzip: run.gzip },
  };
}

async function* dropFirst<T>(items: AsyncIterable<T>, n: number): AsyncIterable<T> {
  let i = 0;
  for await (const item of items) if (i++ >= n) yield item;
}

function entriesFrom(source: DatasetSource, split: SplitName, start: number): AsyncIterable<SourceEntry> {
  return source.entries ? source.entries(split, start) : dropFirst(source.items(split), start);
}

export async function buildFromSource(source: DatasetSource, run: BuildRun): Promise<BuildResult> {
  const log = run.log ?? stderrLine;
  const out = resolve(run.out);
  const tmp = out + BUILDING_SUFFIX;
  const { fingerprint, options } = buildIdentity(source, run);
  await mkdir(tmp, { recursive: true });
  const release = await takeLock(tmp);
  let journal: BuildJournal | null = null;
  try {
    journal = await BuildJournal.open(tmp, fingerprint, options, log);
    const kept = journal.shardCount();
    if (kept > 0) log(`data: resuming the build in ${tmp}: ${kept} shard(s) already written`);
    for (const n of source.listing?.notes ?? []) log(`data: note: ${n}`);
    const splits = { train: await buildSplit(source, run, journal, tmp, 'train'), val: await buildSplit(source, run, journal, tmp, 'val') };
    const stats: StatSums[] = [];
    const files: ReportEntry[] = [...(source.listing?.skipped ?? [])];
    for (const split of SPLITS) {
      for (const s of journal.split(split).shards) {
        if (s.stats) stats.push(s.stats);
        files.push(...s.report);
      }
      files.push(...(journal.split(split).finished?.report ?? []));
    }
    const manifest: Manifest = {
      format: 'vt-shards',
      version: 1,
      dataset: source.dataset,
      classes: source.classes,
      image: source.image,
      ...meanStd(stats, source.image.channels),
      gzip: run.gzip,
      splits,
    };
    validateManifest(manifest, 'the built manifest');
    const report = makeReport(source.dataset, source.listing?.layout ?? source.dataset, fingerprint, options, source.listing?.notes ?? [], files);
    if (source.listing || files.length > 0) await writeFileAtomic(join(tmp, REPORT_FILE), `${JSON.stringify(report, null, 1)}\n`, true);
    await writeFileAtomic(join(tmp, MANIFEST_FILE), `${JSON.stringify(manifest, null, 1)}\n`, true);
    await journal.remove();
    await release();
    await replaceDir(tmp, out);
    if (source.listing || files.length > 0) log(summarizeReport(report, join(out, REPORT_FILE)));
    return { manifest, report };
  } catch (e) {
    await release();
    const kept = journal?.shardCount() ?? 0;
    if (kept === 0) await rm(tmp, { recursive: true, force: true });
    else log(`data: build stopped; its ${kept} complete shard(s) are kept in ${tmp}: run the same command again to resume`);
    throw e;
  }
}

async function buildSplit(source: DatasetSource, run: BuildRun, journal: BuildJournal, tmp: string, split: SplitName): Promise<SplitInfo> {
  const state = journal.split(split);
  const writer = new SplitWriter(tmp, split, source.image.encoding, run.samplesPerShard, run.gzip, state.shards.map((s) => s.info));
  if (state.finished) return writer.info();
  let pos = state.shards.at(-1)?.end ?? 0;
  const total = source.count(split);
  const bar = run.progress ? makeProgress(`${source.dataset} ${split}`, total, process.stderr, pos) : silentProgress();
  let sums = emptySums(source.image.channels);
  let report: ReportEntry[] = [];
  const record = async (info: SplitInfo['shards'][number] | null): Promise<void> => {
    if (!info) return;
    const shard: JournalShard = { info, end: pos, stats: split === 'train' ? sums : null, report };
    await journal.shardDone(split, shard);
    sums = emptySums(source.image.channels);
    report = [];
    await run.onShardWritten?.(split, state.shards.length - 1);
  };
  for await (const e of entriesFrom(source, split, pos)) {
    pos++;
    bar.tick();
    if (isSkipped(e)) {
      report.push(e.skipped);
      continue;
    }
    if (e.note) report.push(e.note);
    if (split === 'train') addImage(sums, e.raw);
    await record(await writer.add(e.bytes, e.label));
  }
  await record(await writer.close());
  await journal.splitDone(split, report);
  bar.done();
  return writer.info();
}

/** The manifest of a complete build in `dir`, or null when there is none (or it is damaged). */
export async function readComplete(dir: string): Promise<Manifest | null> {
  const path = join(dir, MANIFEST_FILE);
  if (!(await exists(path))) return null;
  let manifest: Manifest;
  try {
    manifest = validateManifest(JSON.parse(await readFile(path, 'utf8')) as unknown, path);
  } catch (e) {
    // Manifests are written atomically: an invalid one is from another version. Rebuild.
    if (!(e instanceof SyntaxError || (e instanceof DataError && e.kind === 'bad-manifest'))) throw e;
    process.stderr.write(`${e.message}\ndata: rebuilding ${dir}\n`);
    return null;
  }
  for (const split of SPLITS) {
    for (const s of manifest.splits[split].shards) {
      const file = join(dir, s.file);
      if (!(await exists(file)) || (await stat(file)).size !== s.bytes) return null;
    }
  }
  return manifest;
}

/** The build identity recorded in `dir`'s build-report.json (null when it has none). */
export async function readIdentity(dir: string): Promise<{ fingerprint: string; options: BuildKey } | null> {
  const path = join(dir, REPORT_FILE);
  if (!(await exists(path))) return null;
  try {
    return parseReportIdentity(JSON.parse(await readFile(path, 'utf8')) as unknown);
  } catch (e) {
    if (e instanceof SyntaxError) return null;
    throw e;
  }
}

/** True when `dir` holds a complete build of this source with these options. */
export async function isSameBuild(dir: string, id: { fingerprint: string; options: BuildKey }): Promise<Manifest | null> {
  const manifest = await readComplete(dir);
  const have = manifest ? await readIdentity(dir) : null;
  return manifest && have && have.fingerprint === id.fingerprint && sameKey(have.options, id.options) ? manifest : null;
}
