// The entry of the benchmark bundle for a GPU machine that has no Node packages
// (scripts/device/gpu-pack.sh bundles it with esbuild; scripts/device/gpu.sh runs it):
//   node bench.mjs adapter [--out=FILE]    the adapter, its features and limits, as JSON
//   node bench.mjs kernels [options]       `npm run bench -- kernels` (bench/kernels.ts)
//   node bench.mjs step [options]          `npm run bench -- step` (bench/step.ts)
//   node bench.mjs specs --models=LIST     the step bench's models as JSON specs, for the
//                                          PyTorch anchor (bench/gpu/torch_anchor.py)
// Never run through tsx: TF.js's gradient registrations are imported here statically, which
// only a bundler resolves (plain Node cannot; bench/tfjs-webgpu.ts bundles them at run time).
import '@tensorflow/tfjs-core/dist/register_all_gradients.js';
import { GRADIENTS_REGISTERED } from '../tfjs-webgpu.ts';
import { main as kernels } from '../kernels.ts';
import { main as step } from '../step.ts';
import { DEFAULT_STEP_MODELS, parseStepModels, specsJson } from '../step-models.ts';
import { adapterReport } from './adapter.ts';

(globalThis as Record<symbol, unknown>)[GRADIENTS_REGISTERED] = true;

const [cmd, ...args] = process.argv.slice(2);
const option = (k: string) => args.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);

if (cmd === 'adapter') {
  const text = JSON.stringify(await adapterReport(), null, 1);
  console.log(text);
  const out = option('out');
  if (out) (await import('node:fs')).writeFileSync(out, text);
} else if (cmd === 'kernels') {
  await kernels(args);
} else if (cmd === 'step') {
  await step(args);
} else if (cmd === 'specs') {
  const models = parseStepModels(option('models') ?? DEFAULT_STEP_MODELS, Number(option('batch') ?? 64));
  console.log(specsJson(models));
} else {
  console.error('usage: node bench.mjs adapter | kernels [--gpu|--quick] [--list] | step [--models=LIST] [--no-peer] | specs --models=LIST');
  process.exitCode = 2;
}
process.exit(Number(process.exitCode ?? 0));
