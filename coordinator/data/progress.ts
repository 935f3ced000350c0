// A one-line progress bar on stderr ("\r" redraws), at most ten redraws a second on a
// terminal and one every five seconds into a file or pipe: count, rate and time left. A
// resumed build starts the count at what it already has; the rate counts this run's work only.

export interface Progress {
  tick(n?: number): void;
  done(): void;
}

export const silentProgress = (): Progress => ({ tick: () => undefined, done: () => undefined });

/** "1h02m", "3m05s", "12s". */
export function formatDuration(secs: number): string {
  if (!Number.isFinite(secs)) return '?';
  const s = Math.max(0, Math.round(secs));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h}h${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${s}s`;
}

export function makeProgress(label: string, total: number, out: NodeJS.WriteStream = process.stderr, start = 0): Progress {
  let count = start;
  let last = Date.now();
  const t0 = Date.now();
  const every = out.isTTY ? 100 : 5000;
  const draw = (): void => {
    const f = total > 0 ? Math.min(count / total, 1) : 1;
    const bar = '#'.repeat(Math.round(f * 30)).padEnd(30, '.');
    const secs = (Date.now() - t0) / 1000;
    const rate = secs > 0 ? (count - start) / secs : 0;
    const eta = count >= total ? `${formatDuration(secs)} taken` : `ETA ${rate > 0 ? formatDuration((total - count) / rate) : '?'}`;
    out.write(`${out.isTTY ? '\r' : ''}${label} [${bar}] ${count}/${total} ${(f * 100).toFixed(0)}% ${Math.round(rate)}/s ${eta} ${out.isTTY ? '' : '\n'}`);
  };
  return {
    tick(n = 1) {
      count += n;
      const now = Date.now();
      if (now - last >= every) {
        last = now;
        draw();
      }
    },
    done() {
      draw();
      if (out.isTTY) out.write('\n');
    },
  };
}
