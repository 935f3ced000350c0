// Command line of the coordinator: `start` (the main job), `build-shards` / `ensure` (data).
import { ArgError, runCli } from '../src/cli/args.ts';
import { main as dataMain } from './data/cli.ts';
import { START_USAGE, startMain } from './main.ts';

const USAGE = `usage: coordinator/cli.ts start [options] | build-shards ... | ensure NAME | imagenet --src DIR [--size 64|128|224]\n${START_USAGE}`;

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  if (cmd === 'start') return startMain(rest);
  if (cmd === 'build-shards' || cmd === 'ensure' || cmd === 'imagenet') {
    await dataMain(argv);
    return;
  }
  throw new ArgError(`unknown command "${cmd ?? ''}"\n${USAGE}`);
}

runCli(() => main(process.argv.slice(2)));
