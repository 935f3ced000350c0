// npm run export -- --job DIR [--step N] --out model.onnx [--data DIR]
// A job folder's checkpoint as an ONNX file (src/export). Exit 0 when written; exit 2 with one
// line saying what to do when anything is missing or wrong (and no file written).
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ExportError } from '../src/export/errors.ts';
import { exportJob, type ExportResult } from '../src/export/job.ts';
import { ArgError, Args } from '../src/cli/args.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** npm start's default --cache (coordinator/data/cli.ts), not imported: that loads sharp. */
const DEFAULT_DATA_DIR = resolve(ROOT, '.cache', 'data');

export const EXPORT_USAGE = `usage: npm run export -- --job DIR --out FILE.onnx [--step N] [--data DIR]
  --job DIR    the job folder (npm start prints it as "job folder:"; default .cache/jobs/<model>-<dataset>)
  --out FILE   the ONNX file to write (opset 17); its folder must exist
  --step N     the checkpoint of step N (default: the newest)
  --data DIR   where the data set was built (npm start's --cache; default .cache/data): the
               input size, class names and normalisation come from its manifest.json`;

/** Parses argv and exports; throws ExportError (or ArgError) on anything wrong. */
export async function exportMain(argv: readonly string[]): Promise<ExportResult | null> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${EXPORT_USAGE}\n`);
    return null;
  }
  const a = new Args(argv);
  const jobDir = a.str('job', '');
  const out = a.str('out', '');
  const step = a.int('step', -1, 0);
  const dataDir = a.str('data', DEFAULT_DATA_DIR);
  a.rejectUnknown(EXPORT_USAGE);
  if (!jobDir || jobDir === 'true') {
    throw new ExportError(
      'usage',
      'export needs --job DIR (the job folder npm start printed): npm run export -- --job .cache/jobs/small-cnn-cifar10 --out model.onnx',
    );
  }
  if (!out || out === 'true') {
    throw new ExportError('usage', 'export needs --out FILE.onnx (where to write the model): npm run export -- --job DIR --out model.onnx');
  }
  return exportJob({ jobDir, out, dataDir, step: step >= 0 ? step : undefined });
}

function describe(r: ExportResult): string {
  return [
    `wrote ${r.out} (${(r.bytes / 2 ** 20).toFixed(1)} MiB): ${r.model} on ${r.dataset}, step ${r.step}, ONNX opset 17`,
    `  input "input": float32 [batch, ${r.input.join(', ')}], each channel (pixel / 255 - mean[c]) / std[c]; `
      + `output "logits": float32 [batch, ${r.classes.length}]`,
    '  in the file\'s metadata_props, and here for onnxruntime-web (which does not expose them):',
    `  ${JSON.stringify({ mean: r.mean, std: r.std, classes: r.classes })}`,
  ].join('\n');
}

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  exportMain(process.argv.slice(2)).then(
    (r) => {
      if (r) process.stdout.write(`${describe(r)}\n`);
      process.exit(0);
    },
    (e: unknown) => {
      if (e instanceof ExportError || e instanceof ArgError) {
        process.stderr.write(`export: ${e.message.split('\n')[0]}\n`);
        process.exit(2);
      }
      process.stderr.write(`export failed: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
}
