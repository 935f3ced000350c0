// How fast this machine runs a fixed piece of work right now, measured beside a benchmark.
// A benchmark that compares runs made minutes apart on a shared (virtual) machine would also
// measure any change in the machine's speed between them; the probe says whether there was one
// (on 2026-11-27 there was not: 17.5-17.7 ms a loop across churn benches whose calm runs
// differed by up to 29%). The probe is a child process at the lowest priority (`nice -n 19`, so it takes
// almost nothing from the run it watches) that times a fixed integer loop in its OWN CPU time
// every `everyMs`: waiting for a core does not count, a slower core does.
import { spawn, type ChildProcess } from 'node:child_process';
import { median } from '../src/stats.ts';

/** One probe: when it ended (epoch ms) and the CPU ms the fixed loop took. */
export interface SpeedSample { at: number; cpuMs: number }

/** The probe child's program: prints `<epoch ms> <cpu µs>` per loop. */
const CHILD = `
const every = Number(process.argv[1]);
const loop = () => { let x = 0; for (let i = 0; i < 4e6; i++) x = (x + i * 2654435761) >>> 0; return x; };
for (let i = 0; i < 20; i++) loop();
const tick = () => {
  const c0 = process.cpuUsage(); const x = loop(); const c = process.cpuUsage(c0);
  process.stdout.write(Date.now() + ' ' + (c.user + c.system) + ' ' + (x & 1) + '\\n');
};
setInterval(tick, every);
`;

/** Parses the child's lines (`<epoch ms> <cpu µs> <bit>`); malformed lines are skipped. */
export function parseSamples(text: string): SpeedSample[] {
  return text.split('\n').flatMap((line) => {
    const [at, us] = line.trim().split(/\s+/).map(Number);
    return Number.isFinite(at) && Number.isFinite(us) && us! > 0 ? [{ at: at!, cpuMs: us! / 1000 }] : [];
  });
}

/** The median CPU ms of the samples that ended in [fromMs, toMs], or null when none did. */
export function speedBetween(samples: readonly SpeedSample[], fromMs: number, toMs: number): number | null {
  const xs = samples.filter((s) => s.at >= fromMs && s.at <= toMs).map((s) => s.cpuMs);
  return xs.length ? median(xs) : null;
}

/** A running probe (owns the child process). */
export class SpeedProbe {
  private readonly child: ChildProcess;
  private text = '';

  constructor(everyMs = 2000) {
    this.child = spawn('nice', ['-n', '19', process.execPath, '-e', CHILD, String(everyMs)], { stdio: ['ignore', 'pipe', 'ignore'] });
    this.child.stdout!.setEncoding('utf8');
    this.child.stdout!.on('data', (chunk: string) => { this.text += chunk; });
    this.child.on('error', () => undefined); // no `nice` or node: no samples, speedBetween says null
  }

  get samples(): SpeedSample[] {
    return parseSamples(this.text);
  }

  stop(): void {
    this.child.kill('SIGKILL');
  }
}
