// A one-line progress bar on stderr ("\r" redraws), at most ten redraws a second on a
// terminal and one every five seconds into a file or pipe.

export interface Progress {
  tick(n?: number): void;
  done(): void;
}

export const silentProgress = (): Progress => ({ tick: () => undefined, done: () => undefined });

export function makeProgress(label: string, total: number, out: NodeJS.WriteStream = process.stderr): Progress {
  let count = 0;
  let last = Date.now();
  const start = Date.now();
  const every = out.isTTY ? 100 : 5000;
  const draw = (): void => {
    const f = total > 0 ? Math.min(count / total, 1) : 1;
    const bar = '#'.repeat(Math.round(f * 30)).padEnd(30, '.');
    const secs = (Date.now() - start) / 1000;
    const rate = secs > 0 ? Math.round(count / secs) : 0;
    out.write(`\r${label} [${bar}] ${count}/${total} ${(f * 100).toFixed(0)}% ${rate}/s `);
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
      out.write('\n');
    },
  };
}
