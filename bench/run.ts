// `npm run bench -- NAME [args] [--record]`: runs bench/NAME.ts, which writes bench/results/NAME.json
// and a plot and prints one JSON summary object as its last line; with --record that line is
// also kept, with the run's settings, machine, date and commit, in docs/results/NAME.json (run-record.ts).
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { appendRecord, lastJsonLine, recordFile, recordOf } from './run-record.ts';

const here = dirname(fileURLToPath(import.meta.url));
const name = process.argv[2];
const available = readdirSync(here)
  // Benchmarks are bench/NAME.ts with a one-word name; helper modules have a '-' or are listed here.
  .filter((f) => f.endsWith('.ts') && !['run.ts', 'plot.ts', 'timing.ts'].includes(f) && !f.startsWith('_') && !f.includes('-'))
  .map((f) => f.slice(0, -3));
if (!name || !existsSync(join(here, `${name}.ts`)) || !available.includes(name)) {
  console.error(`usage: npm run bench -- NAME   (available: ${available.join(', ')})`);
  process.exit(2);
}
const mod = (await import(`./${name}.ts`)) as { main(args: string[]): Promise<void> };
// --record (bench/run-record.ts): keep the summary line in docs/results/NAME.json.
const record = process.argv.includes('--record');
const args = process.argv.slice(3).filter((a) => a !== '--record');
let out = '';
if (record) {
  const write = process.stdout.write.bind(process.stdout) as (chunk: string | Uint8Array, ...rest: unknown[]) => boolean;
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    out = (out + (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'))).slice(-(1 << 20));
    return write(chunk, ...rest);
  }) as typeof process.stdout.write;
}
const t0 = performance.now();
await mod.main(args);
if (record) {
  const summary = lastJsonLine(out);
  // A benchmark whose checks failed sets process.exitCode after printing its summary (churn): not recorded.
  if (summary === null || Number(process.exitCode ?? 0) !== 0) {
    console.error(`bench ${name}: nothing recorded (${summary === null ? 'its last line is no JSON summary' : `it exited with ${String(process.exitCode)}`})`);
  } else {
    const root = join(here, '..');
    const file = recordFile(root, name);
    const n = appendRecord(file, name, recordOf(root, args, (performance.now() - t0) / 1000, summary));
    console.error(`bench ${name}: recorded as run ${n} in ${file}`);
  }
}
// A benchmark whose checks failed sets process.exitCode after printing its summary (churn).
process.exit(Number(process.exitCode ?? 0));
