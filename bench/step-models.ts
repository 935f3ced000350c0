// Which models the `step` benchmark trains, and at what size: `NAME@SIDE:BATCH` items, comma
// separated (`--models=small-cnn@32:64,resnet50@224:32`). The same list goes to the PyTorch
// anchor on a GPU machine (scripts/device/gpu.sh), which builds each model from the spec this
// file makes, so both sides train the same layers on the same shapes.
import { MODEL_NAMES, modelByName, type ModelName } from '../src/nn/models.ts';
import type { ModelSpec } from '../src/nn/graph.ts';
import { layoutOf } from '../src/nn/layout.ts';

export interface StepModel { name: ModelName; side: number; batch: number; spec: ModelSpec }

/** The default: what the benchmark measured before it took a list (CIFAR-sized, batch 64). */
export const DEFAULT_STEP_MODELS = 'small-cnn@32:64,resnet20@32:64';

/** ImageNet models train on 1000 classes; the CIFAR-sized ones on 10. */
function classesOf(name: ModelName): number {
  return name === 'resnet50' || name === 'alexnet' || name === 'alexnet-bn' ? 1000 : 10;
}

/** Parses `NAME@SIDE:BATCH,...` (SIDE and BATCH optional: 32 and `defaultBatch`). */
export function parseStepModels(list: string, defaultBatch = 64): StepModel[] {
  const items = list.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (items.length === 0) throw new Error(`--models: empty list; give NAME@SIDE:BATCH items, e.g. ${DEFAULT_STEP_MODELS}`);
  return items.map((item) => {
    const m = /^([a-z0-9-]+)(?:@(\d+))?(?::(\d+))?$/.exec(item);
    if (!m) throw new Error(`--models: "${item}" is not NAME@SIDE:BATCH (e.g. resnet50@64:32)`);
    const name = m[1] as ModelName;
    if (!MODEL_NAMES.includes(name)) throw new Error(`--models: unknown model "${m[1]}"; the models are ${MODEL_NAMES.join(', ')}`);
    const side = Number(m[2] ?? 32), batch = Number(m[3] ?? defaultBatch);
    if (!(side >= 8 && side <= 512)) throw new Error(`--models: "${item}": the side must be 8..512 pixels`);
    if (!(batch >= 1 && batch <= 4096)) throw new Error(`--models: "${item}": the batch must be 1..4096`);
    return { name, side, batch, spec: modelByName(name, [3, side, side], classesOf(name)) };
  });
}

/** A row's label: `resnet50@64 b32`. */
export function stepLabel(m: { name: string; side: number; batch: number }): string {
  return `${m.name}@${m.side} b${m.batch}`;
}

/** Trainable parameters (the layout's flat buffer pads each tensor to an alignment). */
export function parameterCount(spec: ModelSpec): number {
  return layoutOf(spec).params.reduce((s, p) => s + p.length, 0);
}

/** The list as the PyTorch anchors read it (bench/torch_models.py builds each spec). */
export function specsJson(models: StepModel[]): string {
  return JSON.stringify(models.map((m) => ({ label: stepLabel(m), params: parameterCount(m.spec), ...m })));
}
