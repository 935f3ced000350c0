// A one-line terminal progress bar for training: step, epoch, loss, accuracy, images/s.
export interface ProgressState {
  step: number;
  totalSteps: number;
  epoch: number;
  loss: number | null;
  top1: number | null;
  imagesPerSec: number | null;
  peers?: number;
  /** The job's compute utilisation so far (src/train/utilisation.ts); absent: not shown. */
  utilisation?: number | null;
}

const fmt = (v: number | null, digits: number, suffix = '') => (v === null || !Number.isFinite(v) ? '-' : `${v.toFixed(digits)}${suffix}`);

export function progressLine(s: ProgressState, width = 24): string {
  const frac = s.totalSteps > 0 ? Math.min(1, s.step / s.totalSteps) : 0;
  const filled = Math.round(frac * width);
  const bar = `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
  const parts = [
    `[${bar}] step ${s.step}/${s.totalSteps}`,
    `epoch ${s.epoch.toFixed(2)}`,
    `loss ${fmt(s.loss, 4)}`,
    `top-1 ${fmt(s.top1 === null ? null : s.top1 * 100, 1, '%')}`,
    `${fmt(s.imagesPerSec, 1)} img/s`,
  ];
  if (s.peers !== undefined) parts.push(`peers ${s.peers}`);
  if (s.utilisation !== undefined) parts.push(`compute ${fmt(s.utilisation === null ? null : s.utilisation * 100, 0, '%')}`);
  return parts.join('  ');
}

/** Rewrites the current terminal line when stderr is a TTY; otherwise prints every `every`-th line. */
export class ProgressPrinter {
  private last = 0;
  constructor(private readonly out: NodeJS.WriteStream | { write(s: string): boolean; isTTY?: boolean }, private readonly every = 10) {}
  update(s: ProgressState, force = false): void {
    const line = progressLine(s);
    if (this.out.isTTY) this.out.write(`\r${line}\x1b[K`);
    else if (force || s.step - this.last >= this.every) {
      this.out.write(`${line}\n`);
      this.last = s.step;
    }
  }
  done(s: ProgressState): void {
    if (this.out.isTTY) this.out.write(`\r${progressLine(s)}\x1b[K\n`);
    else this.out.write(`${progressLine(s)}\n`);
  }
}
