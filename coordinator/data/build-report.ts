// What a build did with the files it could not take as they were: each bad file by path with
// the action taken ('converted': kept after a conversion; 'skipped': left out) and why. The
// full list goes to build-report.json beside the manifest; stderr gets a short summary.

export type ReportAction = 'converted' | 'skipped';

export interface ReportEntry {
  readonly path: string;
  readonly action: ReportAction;
  readonly reason: string;
}

export const REPORT_FILE = 'build-report.json';

/** build-report.json: the bad files, the layout notes and what identifies the build. */
export interface BuildReport {
  readonly format: 'vt-build-report';
  readonly version: 1;
  readonly dataset: string;
  /** How the source was read (e.g. "train: class folders; val: LOC_val_solution.csv"). */
  readonly layout: string;
  /** The source listing's fingerprint and the options the shards depend on. */
  readonly fingerprint: string;
  readonly options: BuildKey;
  readonly notes: readonly string[];
  readonly counts: Readonly<Record<ReportAction, number>>;
  readonly files: readonly ReportEntry[];
}

/** The options a build's bytes depend on; a partial or complete build is reused only when they match. */
export type BuildKey = Readonly<Record<string, string | number | boolean | null>>;

export function makeReport(
  dataset: string, layout: string, fingerprint: string, options: BuildKey, notes: readonly string[], files: readonly ReportEntry[],
): BuildReport {
  const counts = { converted: 0, skipped: 0 };
  for (const f of files) counts[f.action]++;
  return { format: 'vt-build-report', version: 1, dataset, layout, fingerprint, options, notes, counts, files };
}

/** Reads back the identity of a build (null when the file is absent or not a report). */
export function parseReportIdentity(json: unknown): { fingerprint: string; options: BuildKey } | null {
  if (typeof json !== 'object' || json === null) return null;
  const r = json as Record<string, unknown>;
  if (r.format !== 'vt-build-report' || typeof r.fingerprint !== 'string' || typeof r.options !== 'object' || r.options === null) return null;
  return { fingerprint: r.fingerprint, options: r.options as BuildKey };
}

export function sameKey(a: BuildKey, b: BuildKey): boolean {
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k]);
}

/** A few lines for stderr: counts per action and reason, then the first `show` paths (notes are said when the build starts). */
export function summarizeReport(report: BuildReport, where: string, show = 10): string {
  const lines: string[] = [];
  if (report.files.length === 0) return `data: no bad files (${report.layout})`;
  const byReason = new Map<string, number>();
  for (const f of report.files) {
    const k = `${f.action}: ${f.reason.split(/: | \(/)[0]}`;
    byReason.set(k, (byReason.get(k) ?? 0) + 1);
  }
  lines.push(`data: ${report.counts.converted} file(s) converted, ${report.counts.skipped} skipped:`);
  for (const [k, n] of byReason) lines.push(`  ${n} x ${k}`);
  for (const f of report.files.slice(0, show)) lines.push(`  ${f.action} ${f.path}: ${f.reason}`);
  if (report.files.length > show) lines.push(`  ... ${report.files.length - show} more`);
  lines.push(`data: the full list is in ${where}`);
  return lines.join('\n');
}
