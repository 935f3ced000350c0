// Command line of the coordinator: `start` (the main job), `build-shards` / `ensure` (data).
import { ArgError } from './args.ts';
import { main as dataMain } from './data/cli.ts';
import { START_USAGE, startMain } from './main.ts';

const USAGE = `usage: coordinator/cli.ts start [options] | build-shards ... | ensure NAME\n${START_USAGE}`;

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  if (cmd === 'start') return startMain(rest);
  if (cmd === 'build-shards' || cmd === 'ensure') {
    await dataMain(argv);
    return;
  }
  throw new ArgError(`unknown command "${cmd ?? ''}"\n${USAGE}`);
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (e: unknown) => {
    const err = e instanceof Error ? e : new Error(String(e));
    // Typed errors (ArgError, and every error with a `kind`) carry a message that says what to
    // do; only unexpected errors get a stack trace.
    const typed = err.name === 'ArgError' || 'kind' in err;
    process.stderr.write(`\n${typed ? err.message : err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
