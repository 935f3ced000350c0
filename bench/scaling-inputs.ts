// The inputs of the scaling bench's predictions, each marked measured (with the command that
// measures it), fitted (from this run's own measurements), assumed (with the reason) or code
// (a default or rule of the code the prediction follows), as the
// JSON and docs/scaling.md print them. The link's rate comes from the transport bench's newest
// recorded run (docs/results/transport.json, `npm run bench -- transport --record`): the
// one-way throughput of a Node volunteers' direct link and of a donor page's link between two
// namespaced hosts on a 1 Gbit/s line, CPU cost included.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { recordFile, type RecordedRun } from './run-record.ts';

/** measured: by a command; fitted: from this run's own measurements; assumed: a guess, with why; code: what the code does (a default or a rule). */
export type InputStatus = 'measured' | 'fitted' | 'assumed' | 'code';

/** One input of the predictions. */
export interface PredictionInput {
  value: number;
  unit: string;
  status: InputStatus;
  /** measured: the command (and the file it is read from); fitted: from what; assumed: why. */
  source: string;
}

/** What the predictions take from a transport run. */
export interface TransportFigures {
  /** A Node volunteers' direct link (TLS over TCP), one way, 1 Gbit/s line: MB/s (1e6 bytes). */
  nodeMBps: number;
  /** A donor page's link (Chromium, the page-to-worker relay): MB/s. */
  pageMBps: number;
  /** Kernel TCP on the same line: the physical anchor. */
  tcpMBps: number;
  /** CPU-seconds per GB (1e9 bytes) of the Node link: receiving, sending. */
  nodeCpuSPerGb: number;
  nodeSendCpuSPerGb: number;
  /** The same for a donor page's link (the receiving and the sending host). */
  pageCpuSPerGb: number;
  pageSendCpuSPerGb: number;
  /** Where it came from: the record file, the run's date and commit. */
  file: string;
  date: string;
  commit: string | null;
}

/** The summary keys read, in TransportFigures' order. */
const KEYS = ['node_mbps', 'page_mbps', 'tcp_mbps', 'node_cpu_s_per_gb', 'node_send_cpu_s_per_gb', 'page_cpu_s_per_gb', 'page_send_cpu_s_per_gb'] as const;

/**
 * Bytes/s a ring peer's link carries each way: the one-way rate measured, or less where sending and
 * receiving at once would need more than one core (the ring does both on every link at once).
 */
export const ringLinkRate = (oneWayMBps: number, recvCpuSPerGb: number, sendCpuSPerGb: number): number =>
  Math.min(oneWayMBps * 1e6, 1e9 / (recvCpuSPerGb + sendCpuSPerGb));

const num = (o: Record<string, unknown>, k: string): number | null => (typeof o[k] === 'number' && Number.isFinite(o[k]) ? o[k] : null);

/**
 * The newest recorded transport run in `root`'s docs/results/transport.json that has the figures
 * the predictions need; null (with why) when there is none.
 */
export function readTransport(root: string): TransportFigures | { missing: string } {
  const file = recordFile(root, 'transport');
  if (!existsSync(file)) return { missing: `${file} does not exist: run npm run bench -- transport --record` };
  let runs: RecordedRun[];
  try {
    runs = (JSON.parse(readFileSync(file, 'utf8')) as { runs: RecordedRun[] }).runs;
  } catch (e) {
    return { missing: `${file} is not a record of runs (${e instanceof Error ? e.message : String(e)})` };
  }
  for (const run of [...(Array.isArray(runs) ? runs : [])].reverse()) {
    const s = (run.summary ?? {}) as Record<string, unknown>;
    const v = KEYS.map((k) => num(s, k));
    if (v.some((x) => x === null)) continue;
    const [nodeMBps, pageMBps, tcpMBps, nodeCpuSPerGb, nodeSendCpuSPerGb, pageCpuSPerGb, pageSendCpuSPerGb] = v as number[];
    return {
      nodeMBps: nodeMBps!, pageMBps: pageMBps!, tcpMBps: tcpMBps!, nodeCpuSPerGb: nodeCpuSPerGb!, nodeSendCpuSPerGb: nodeSendCpuSPerGb!,
      pageCpuSPerGb: pageCpuSPerGb!, pageSendCpuSPerGb: pageSendCpuSPerGb!, file: join('docs', 'results', 'transport.json'), date: run.date, commit: run.commit,
    };
  }
  return { missing: `no run in ${file} has ${KEYS.join(', ')}: run npm run bench -- transport --record (without --no-page)` };
}

/** How a transport run reads as inputs. */
export function transportInputs(t: TransportFigures): Record<string, PredictionInput> {
  const from = `npm run bench -- transport (${t.file}, run of ${t.date.slice(0, 10)}${t.commit ? ` at ${t.commit.slice(0, 7)}` : ''})`;
  return {
    nodeLinkMBps: {
      value: t.nodeMBps, unit: 'MB/s', status: 'measured',
      source: `${from}: node_mbps, a Node volunteers' direct link, one way between two namespaced hosts on a 1 Gbit/s line, one core each`,
    },
    pageLinkMBps: { value: t.pageMBps, unit: 'MB/s', status: 'measured', source: `${from}: page_mbps, a donor page's link (Chromium) on the same line` },
    tcpMBps: { value: t.tcpMBps, unit: 'MB/s', status: 'measured', source: `${from}: tcp_mbps, kernel TCP on the same line (the physical anchor)` },
    nodeLinkCpuSPerGb: {
      value: t.nodeCpuSPerGb + t.nodeSendCpuSPerGb, unit: 'CPU-s/GB', status: 'measured',
      source: `${from}: node_cpu_s_per_gb + node_send_cpu_s_per_gb, receiving and sending; a ring peer does both on one core, so its link `
        + `carries at most ${(1e3 / (t.nodeCpuSPerGb + t.nodeSendCpuSPerGb)).toFixed(0)} MB/s each way`,
    },
    pageLinkCpuSPerGb: {
      value: t.pageCpuSPerGb + t.pageSendCpuSPerGb, unit: 'CPU-s/GB', status: 'measured',
      source: `${from}: page_cpu_s_per_gb + page_send_cpu_s_per_gb: a donor page's link carries at most `
        + `${(1e3 / (t.pageCpuSPerGb + t.pageSendCpuSPerGb)).toFixed(0)} MB/s each way when it sends and receives at once`,
    },
  };
}
