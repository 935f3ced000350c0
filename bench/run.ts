// `npm run bench -- NAME [args]`: runs bench/NAME.ts, which writes bench/results/NAME.json
// and a plot and prints one JSON summary object as its last line.
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
await mod.main(process.argv.slice(3));
// A benchmark whose checks failed sets process.exitCode after printing its summary (churn).
process.exit(Number(process.exitCode ?? 0));
