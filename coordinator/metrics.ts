// The job's metrics on disk (metrics.jsonl in the job folder), one JSON record per line,
// appended in order: committed steps with per-peer timings, aborted steps, evaluations,
// checkpoints. The dashboard draws history from it after a restart. A line cut off by a crash
// is skipped when read; a step that was re-run after a restart appears again and the last
// record of a step is the one that counts (latestPerStep).
import { appendFile, readFile } from 'node:fs/promises';
import type { MetricRecord } from '../src/protocol/messages.ts';

export type { MetricRecord } from '../src/protocol/messages.ts';

export interface MetricsLog {
  readonly path: string;
  append(r: MetricRecord): void;
  /** Resolves when everything appended so far is on disk. */
  flush(): Promise<void>;
}

export function openMetricsLog(path: string, log: (line: string) => void): MetricsLog {
  let chain: Promise<void> = Promise.resolve();
  let failed = false;
  return {
    path,
    append(r) {
      const line = `${JSON.stringify(r)}\n`;
      chain = chain.then(() => appendFile(path, line)).catch((e: unknown) => {
        if (!failed) log(`metrics: cannot append to ${path} (${e instanceof Error ? e.message : String(e)}); training goes on without metrics on disk`);
        failed = true;
      });
    },
    flush: () => chain,
  };
}

const TYPES = new Set(['step', 'abort', 'eval', 'checkpoint', 'generation', 'done', 'halted', 'sync', 'verification']);

/** Every readable record of a metrics file, in order (a missing file is an empty history). */
export async function readMetrics(path: string): Promise<MetricRecord[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const out: MetricRecord[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const r = JSON.parse(line) as MetricRecord;
      if (typeof r === 'object' && r !== null && TYPES.has(r.type)) out.push(r);
    } catch (e) {
      if (!(e instanceof SyntaxError)) throw e; // a line cut off by a crash: skip it
    }
  }
  return out;
}

/** The last 'step' record of each step number, by step. */
export function latestPerStep(records: readonly MetricRecord[]): Extract<MetricRecord, { type: 'step' }>[] {
  const by = new Map<number, Extract<MetricRecord, { type: 'step' }>>();
  for (const r of records) if (r.type === 'step') by.set(r.step, r);
  return [...by.values()].sort((a, b) => a.step - b.step);
}
