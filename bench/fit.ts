// `npm run bench -- fit`: what one image costs each model on each engine, as a volunteer measures
// it when it starts (src/nn/fit.ts: a probe of the model at 2 and 4 images, the growth of the
// engine's peak memory), against the floor the model's layout implies (its activations and their
// gradients), and the micro-batch that fits each engine's default budget (wasm: its 4 GiB; WebGPU:
// 2 GiB) with the model in place.
//
//   npm run bench -- fit [--backends wasm,webgpu] [--models resnet50@64,resnet50@224,alexnet-bn@64,alexnet-bn@224,resnet20@32,small-cnn@32]
//
// Writes bench/results/fit.json and fit.svg and prints, last,
// {"bench":"fit","resnet50_64_wasm_mib":..,"resnet50_64_wasm_fits":..,...}
import { join } from 'node:path';
import { Args } from '../src/cli/args.ts';
import { ROOT } from '../coordinator/local-volunteers.ts';
import type { AnyEngine } from '../src/backend/engine.ts';
import { fitMicroBatch, layoutFloorBytes, measureFootprint } from '../src/nn/fit.ts';
import { Model } from '../src/nn/model.ts';
import { MODEL_NAMES, modelByName, type ModelName } from '../src/nn/models.ts';
import { WebGpuEngine } from '../src/backend/webgpu.ts';
import { getDevice } from '../src/gpu/device.ts';
import { WasmEngine } from '../src/wasm/engine.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';

const USAGE = 'usage: npm run bench -- fit [--backends wasm,webgpu] [--models resnet50@64,alexnet-bn@64,...]';
const MiB = 2 ** 20;

export interface FitRow { backend: string; model: string; side: number; perImageMiB: number; floorMiB: number; modelMiB: number; fits: number; bound: string }

export async function main(argv: string[]): Promise<void> {
  const a = new Args(argv);
  const backends = a.str('backends', 'wasm,webgpu').split(',') as ('wasm' | 'webgpu')[];
  const models = a.str('models', 'resnet50@64,resnet50@224,alexnet-bn@64,alexnet-bn@224,resnet20@32,small-cnn@32').split(',').map((m) => {
    const [name, side] = m.split('@');
    if (!(MODEL_NAMES as readonly string[]).includes(name ?? '') || !Number(side)) {
      throw new Error(`--models takes model@side, e.g. resnet50@64; got "${m}"\n${USAGE}`);
    }
    return { name: name as ModelName, side: Number(side) };
  });
  a.rejectUnknown(USAGE);
  const rows: FitRow[] = [];
  for (const backend of backends) {
    const e: AnyEngine = backend === 'webgpu' ? new WebGpuEngine(await getDevice()) : await WasmEngine.create();
    try {
      for (const { name, side } of models) {
        const spec = modelByName(name, [side === 28 ? 1 : 3, side, side], name.startsWith('resnet20') || name === 'small-cnn' ? 10 : 1000);
        const model = new Model(e, spec, { seed: 1 });
        try {
          const f = await measureFootprint(e, spec);
          const floor = layoutFloorBytes(model.layout);
          let fits = 0;
          let bound = '';
          try {
            const fit = fitMicroBatch(f, e.memory(), 1);
            fits = fit.images;
            bound = fit.bound;
          } catch {
            bound = 'none fits';
          }
          const row = {
            backend, model: name, side, perImageMiB: +(f.perImageBytes / MiB).toFixed(2), floorMiB: +(floor / MiB).toFixed(2),
            modelMiB: Math.round(e.memory().usedBytes / MiB), fits, bound,
          };
          rows.push(row);
          console.error(`fit: ${backend} ${name}@${side}: ${row.perImageMiB} MiB an image (layout floor ${row.floorMiB}), model ${row.modelMiB} MiB,`
            + ` ${fits} fit at once (${bound})`);
        } finally {
          model.destroy();
        }
      }
    } finally {
      e.destroy();
    }
  }
  writeFileEnsuringDir(join(ROOT, 'bench', 'results', 'fit.json'), `${JSON.stringify({ rows, date: new Date().toISOString() }, null, 2)}\n`);
  writeFileEnsuringDir(join(ROOT, 'bench', 'results', 'fit.svg'), barChartSvg({
    title: 'Engine memory one more image costs (MiB, measured), by model and engine', yLabel: 'MiB per image',
    categories: models.map((m) => `${m.name}@${m.side}`),
    series: backends.map((b) => ({
      name: b, values: models.map((m) => rows.find((r) => r.backend === b && r.model === m.name && r.side === m.side)?.perImageMiB ?? 0),
    })),
  }));
  const key = (r: FitRow) => `${r.model.replace(/-/g, '')}_${r.side}_${r.backend}`;
  console.log(JSON.stringify({ bench: 'fit', ...Object.fromEntries(rows.flatMap((r) => [[`${key(r)}_mib`, r.perImageMiB], [`${key(r)}_fits`, r.fits]])) }));
}
